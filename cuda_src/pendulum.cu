// Pendulum-v1 (Gymnasium), one thread per env. Mirrors envs/pendulum.py operation by
// operation in float32 (-fmad=false). Any finite action is valid (clipped to
// [-max_torque, max_torque]); NaN and +-inf are not. Never terminates; truncated at 200.
#include "common/single_agent_kernels.cuh"
#include "common/math.cuh"

// The kernels' constants, in the order kernel_consts() in envs/pendulum.py packs them
// (GV_CONSTS, common/consts.cuh: the loader checks the two against each other).
#define PENDULUM_CONSTS(FIELD) \
  FIELD(float, max_torque)                                    \
  FIELD(float, max_speed)                                     \
  FIELD(float, dt)                                            \
  FIELD(float, pi)                                            \
  FIELD(float, two_pi)                                        \
  FIELD(float, speed_cost)        /* 0.1 */                   \
  FIELD(float, action_cost)       /* 0.001 */                 \
  FIELD(float, gravity_k)         /* 3 * g / (2 * length) */  \
  FIELD(float, torque_k)          /* 3.0 / (m * length**2) */ \
  FIELD(float, reset_angle_low)                               \
  FIELD(float, reset_angle_high)                              \
  FIELD(float, reset_speed_low)                               \
  FIELD(float, reset_speed_high)

struct Pendulum {
  static constexpr int kStateDim = 2;  // theta, theta_dot
  static constexpr int kObsDim = 3;
  static constexpr int kResetDraws = 2;
  static constexpr int kActionDim = 1;
  typedef float ActionT;  // Box(1,)

  GV_CONSTS(PENDULUM_CONSTS);

  GV_HD static bool action_valid(const Consts&, const ActionT (&a)[kActionDim]) {
    return isfinite(a[0]);
  }

  GV_HD static void reset(const Consts& c, const float (&u)[kResetDraws],
                          float (&s)[kStateDim]) {
    s[0] = gv_uniform_range(u[0], c.reset_angle_low, c.reset_angle_high);
    s[1] = gv_uniform_range(u[1], c.reset_speed_low, c.reset_speed_high);
  }

  GV_HD static bool step(const Consts& c, float (&s)[kStateDim], const ActionT (&a)[kActionDim],
                         float* reward) {
    const float theta = s[0], theta_dot = s[1];
    const float u = gv_clamp(a[0], -c.max_torque, c.max_torque);
    const float angle = gv_remainder(theta + c.pi, c.two_pi) - c.pi;
    const float costs =
        (angle * angle + c.speed_cost * (theta_dot * theta_dot)) + c.action_cost * (u * u);
    float new_theta_dot =
        theta_dot + (c.gravity_k * gv_sinf(theta) + c.torque_k * u) * c.dt;
    new_theta_dot = gv_clamp(new_theta_dot, -c.max_speed, c.max_speed);
    const float new_theta = theta + new_theta_dot * c.dt;
    *reward = -costs;
    s[0] = new_theta;
    s[1] = new_theta_dot;
    return false;
  }

  GV_HD static void observe(const Consts&, const float (&s)[kStateDim], float (&o)[kObsDim]) {
    o[0] = gv_cosf(s[0]);
    o[1] = gv_sinf(s[0]);
    o[2] = s[1];
  }
};

GV_DEFINE_KERNELS(pendulum, Pendulum)
