// CartPole-v1 (Gymnasium), one thread per env. Mirrors envs/cartpole.py operation by
// operation in float32; compile with -fmad=false so no multiply-add fuses.
//
// Division by a constant is multiplication by a precomputed reciprocal (inv_total_mass):
// that is what torch's CUDA kernels do for `tensor / python_float`, and the binding in
// envs/cartpole.py (kernel_consts, with reciprocal()) rounds that reciprocal as torch does.
#include "common/single_agent_kernels.cuh"

// The kernels' constants, in the order kernel_consts() in envs/cartpole.py packs them
// (GV_CONSTS, common/consts.cuh: the loader checks the two against each other).
#define CARTPOLE_CONSTS(FIELD) \
  FIELD(float, gravity)                 \
  FIELD(float, masspole)                \
  FIELD(float, length)                  \
  FIELD(float, force_mag)               \
  FIELD(float, tau)                     \
  FIELD(float, polemass_length)         \
  FIELD(float, inv_total_mass)          \
  FIELD(float, four_thirds)             \
  FIELD(float, theta_threshold_radians) \
  FIELD(float, x_threshold)             \
  FIELD(float, reset_low)               \
  FIELD(float, reset_high)              \
  FIELD(int, euler)                     \
  FIELD(int, sutton_barto_reward)      

struct CartPole {
  static constexpr int kStateDim = 4;  // x, x_dot, theta, theta_dot
  static constexpr int kObsDim = 4;
  static constexpr int kResetDraws = 4;
  static constexpr int kActionDim = 1;
  typedef long long ActionT;  // Discrete(2)

  GV_CONSTS(CARTPOLE_CONSTS);

  GV_HD static bool action_valid(const Consts&, const ActionT (&a)[kActionDim]) {
    return a[0] >= 0 && a[0] < 2;
  }

  GV_HD static void reset(const Consts& c, const float (&u)[kResetDraws],
                          float (&s)[kStateDim]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) s[k] = gv_uniform_range(u[k], c.reset_low, c.reset_high);
  }

  GV_HD static bool step(const Consts& c, float (&s)[kStateDim], const ActionT (&a)[kActionDim],
                         float* reward) {
    const float x = s[0], x_dot = s[1], theta = s[2], theta_dot = s[3];
    const float force = a[0] == 1 ? c.force_mag : -c.force_mag;
    const float costheta = cosf(theta);
    const float sintheta = sinf(theta);
    const float temp =
        (force + c.polemass_length * (theta_dot * theta_dot) * sintheta) * c.inv_total_mass;
    const float thetaacc =
        (c.gravity * sintheta - costheta * temp) /
        (c.length * (c.four_thirds - c.masspole * (costheta * costheta) * c.inv_total_mass));
    const float xacc = temp - c.polemass_length * thetaacc * costheta * c.inv_total_mass;
    float x_new, x_dot_new, theta_new, theta_dot_new;
    if (c.euler) {
      x_new = x + c.tau * x_dot;
      x_dot_new = x_dot + c.tau * xacc;
      theta_new = theta + c.tau * theta_dot;
      theta_dot_new = theta_dot + c.tau * thetaacc;
    } else {
      x_dot_new = x_dot + c.tau * xacc;
      x_new = x + c.tau * x_dot_new;
      theta_dot_new = theta_dot + c.tau * thetaacc;
      theta_new = theta + c.tau * theta_dot_new;
    }
    const bool terminated = x_new < -c.x_threshold || x_new > c.x_threshold ||
                            theta_new < -c.theta_threshold_radians ||
                            theta_new > c.theta_threshold_radians;
    *reward = c.sutton_barto_reward ? (terminated ? -1.0f : 0.0f) : 1.0f;
    s[0] = x_new;
    s[1] = x_dot_new;
    s[2] = theta_new;
    s[3] = theta_dot_new;
    return terminated;
  }

  GV_HD static void observe(const Consts&, const float (&s)[kStateDim], float (&o)[kObsDim]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) o[k] = s[k];
  }
};

GV_DEFINE_KERNELS(cartpole, CartPole)
