// Acrobot-v1 (Gymnasium), one thread per env: one RK4 step of dt per env step, angles
// wrapped to [-pi, pi], velocities bounded. Mirrors envs/acrobot.py operation by operation
// in float32 (compile with -fmad=false). Constant sub-expressions that the reference folds
// in double arrive here already folded and rounded to float32 by the Python binding; a
// division by a constant is a multiplication by torch's float32 reciprocal (inv_span).
#include "common/single_agent_kernels.cuh"
#include "common/math.cuh"

// The kernels' constants, in the order kernel_consts() in envs/acrobot.py packs them
// (GV_CONSTS, common/consts.cuh: the loader checks the two against each other).
#define ACROBOT_CONSTS(FIELD) \
  FIELD(float, torque[3])                                        \
  FIELD(float, dt)                                               \
  FIELD(float, dt2)         /* dt / 2 */                         \
  FIELD(float, w)           /* dt / 6 */                         \
  FIELD(float, d1_a)        /* m1 * lc1**2 */                    \
  FIELD(float, d1_c)        /* l1**2 + lc2**2 */                 \
  FIELD(float, d1_b)        /* 2 * l1 * lc2 */                   \
  FIELD(float, m2)                                               \
  FIELD(float, i1)                                               \
  FIELD(float, i2)                                               \
  FIELD(float, d2_c)        /* lc2**2 */                         \
  FIELD(float, l1_lc2)      /* l1 * lc2 */                       \
  FIELD(float, phi2_k)      /* m2 * lc2 * g */                   \
  FIELD(float, half_pi)     /* pi / 2 */                         \
  FIELD(float, phi1_a)      /* -m2 * l1 * lc2 */                 \
  FIELD(float, phi1_b)      /* 2 * m2 * l1 * lc2 */              \
  FIELD(float, phi1_c)      /* (m1 * lc1 + m2 * l1) * g */       \
  FIELD(float, m2_l1_lc2)   /* m2 * l1 * lc2 */                  \
  FIELD(float, den_c)       /* m2 * lc2**2 + i2 */               \
  FIELD(float, pi)                                               \
  FIELD(float, neg_pi)                                           \
  FIELD(float, span)        /* 2 pi */                           \
  FIELD(float, inv_span)    /* float32 reciprocal of span */     \
  FIELD(float, max_vel_1)                                        \
  FIELD(float, max_vel_2)                                        \
  FIELD(float, reset_low)                                        \
  FIELD(float, reset_high)                                       \
  FIELD(int, book)          /* 1: "book" equations, 0: "nips" */

struct Acrobot {
  static constexpr int kStateDim = 4;  // theta1, theta2, dtheta1, dtheta2
  static constexpr int kObsDim = 6;
  static constexpr int kResetDraws = 4;
  static constexpr int kActionDim = 1;
  typedef long long ActionT;  // Discrete(3)

  GV_CONSTS(ACROBOT_CONSTS);

  GV_HD static bool action_valid(const Consts&, const ActionT (&a)[kActionDim]) {
    return a[0] >= 0 && a[0] < 3;
  }

  GV_HD static void reset(const Consts& c, const float (&u)[kResetDraws],
                          float (&s)[kStateDim]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) s[k] = gv_uniform_range(u[k], c.reset_low, c.reset_high);
  }

  // AcrobotEnv._dsdt; returns (ddtheta1, ddtheta2) (the angle derivatives are the velocities).
  GV_HD static void derivatives(const Consts& c, float theta1, float theta2, float dtheta1,
                                float dtheta2, float torque, float* ddtheta1, float* ddtheta2) {
    const float cos_theta2 = gv_cosf(theta2);
    const float sin_theta2 = gv_sinf(theta2);
    const float d1 = ((c.d1_a + c.m2 * (c.d1_b * cos_theta2 + c.d1_c)) + c.i1) + c.i2;
    const float d2 = c.m2 * (c.l1_lc2 * cos_theta2 + c.d2_c) + c.i2;
    const float phi2 = c.phi2_k * gv_cosf((theta1 + theta2) - c.half_pi);
    const float phi1 = ((c.phi1_a * (dtheta2 * dtheta2) * sin_theta2 -
                         c.phi1_b * dtheta2 * dtheta1 * sin_theta2) +
                        c.phi1_c * gv_cosf(theta1 - c.half_pi)) +
                       phi2;
    const float den = c.den_c - (d2 * d2) / d1;
    float dd2;
    if (c.book) {
      dd2 = (((torque + (d2 / d1) * phi1) - c.m2_l1_lc2 * (dtheta1 * dtheta1) * sin_theta2) -
             phi2) / den;
    } else {
      dd2 = ((torque + (d2 / d1) * phi1) - phi2) / den;
    }
    *ddtheta1 = -(d2 * dd2 + phi1) / d1;
    *ddtheta2 = dd2;
  }

  // Gymnasium's wrap() in the reference's closed form.
  GV_HD static float wrap(const Consts& c, float x) {
    const float over = gv_clamp(ceilf((x - c.pi) * c.inv_span), 0.0f, INFINITY);
    x = x - over * c.span;
    const float under = gv_clamp(ceilf((c.neg_pi - x) * c.inv_span), 0.0f, INFINITY);
    return x + under * c.span;
  }

  GV_HD static bool step(const Consts& c, float (&s)[kStateDim], const ActionT (&a)[kActionDim],
                         float* reward) {
    const float t1 = s[0], t2 = s[1], v1 = s[2], v2 = s[3];
    const float torque = c.torque[a[0]];
    float k1_v1, k1_v2, k2_v1, k2_v2, k3_v1, k3_v2, k4_v1, k4_v2;
    derivatives(c, t1, t2, v1, v2, torque, &k1_v1, &k1_v2);
    const float k1_t1 = v1, k1_t2 = v2;
    const float k2_t1 = v1 + c.dt2 * k1_v1, k2_t2 = v2 + c.dt2 * k1_v2;
    derivatives(c, t1 + c.dt2 * k1_t1, t2 + c.dt2 * k1_t2, k2_t1, k2_t2, torque, &k2_v1, &k2_v2);
    const float k3_t1 = v1 + c.dt2 * k2_v1, k3_t2 = v2 + c.dt2 * k2_v2;
    derivatives(c, t1 + c.dt2 * k2_t1, t2 + c.dt2 * k2_t2, k3_t1, k3_t2, torque, &k3_v1, &k3_v2);
    const float k4_t1 = v1 + c.dt * k3_v1, k4_t2 = v2 + c.dt * k3_v2;
    derivatives(c, t1 + c.dt * k3_t1, t2 + c.dt * k3_t2, k4_t1, k4_t2, torque, &k4_v1, &k4_v2);
    float t1n = t1 + c.w * (((k1_t1 + 2.0f * k2_t1) + 2.0f * k3_t1) + k4_t1);
    float t2n = t2 + c.w * (((k1_t2 + 2.0f * k2_t2) + 2.0f * k3_t2) + k4_t2);
    float v1n = v1 + c.w * (((k1_v1 + 2.0f * k2_v1) + 2.0f * k3_v1) + k4_v1);
    float v2n = v2 + c.w * (((k1_v2 + 2.0f * k2_v2) + 2.0f * k3_v2) + k4_v2);
    t1n = wrap(c, t1n);
    t2n = wrap(c, t2n);
    v1n = gv_clamp(v1n, -c.max_vel_1, c.max_vel_1);
    v2n = gv_clamp(v2n, -c.max_vel_2, c.max_vel_2);
    const bool terminated = -gv_cosf(t1n) - gv_cosf(t2n + t1n) > 1.0f;
    *reward = terminated ? 0.0f : -1.0f;
    s[0] = t1n;
    s[1] = t2n;
    s[2] = v1n;
    s[3] = v2n;
    return terminated;
  }

  GV_HD static void observe(const Consts&, const float (&s)[kStateDim], float (&o)[kObsDim]) {
    o[0] = gv_cosf(s[0]);
    o[1] = gv_sinf(s[0]);
    o[2] = gv_cosf(s[1]);
    o[3] = gv_sinf(s[1]);
    o[4] = s[2];
    o[5] = s[3];
  }
};

GV_DEFINE_KERNELS(acrobot, Acrobot)
