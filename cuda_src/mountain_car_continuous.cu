// MountainCarContinuous-v0 (Gymnasium), one thread per env. Mirrors
// envs/mountain_car_continuous.py operation by operation in float32 (-fmad=false).
// Any finite action is valid (it is clipped to [min_action, max_action]); NaN and +-inf are not.
#include "common/single_agent_kernels.cuh"
#include "common/math.cuh"

// The kernels' constants, in the order kernel_consts() in envs/mountain_car_continuous.py packs them
// (GV_CONSTS, common/consts.cuh: the loader checks the two against each other).
#define MOUNTAIN_CAR_CONTINUOUS_CONSTS(FIELD) \
  FIELD(float, min_action)    \
  FIELD(float, max_action)    \
  FIELD(float, min_position)  \
  FIELD(float, max_position)  \
  FIELD(float, max_speed)     \
  FIELD(float, goal_position) \
  FIELD(float, goal_velocity) \
  FIELD(float, power)         \
  FIELD(float, gravity)       \
  FIELD(float, goal_reward)   \
  FIELD(float, action_cost)   \
  FIELD(float, reset_low)     \
  FIELD(float, reset_high)   

struct MountainCarContinuous {
  static constexpr int kStateDim = 2;  // position, velocity
  static constexpr int kObsDim = 2;
  static constexpr int kResetDraws = 1;
  static constexpr int kActionDim = 1;
  typedef float ActionT;  // Box(1,)

  GV_CONSTS(MOUNTAIN_CAR_CONTINUOUS_CONSTS);

  GV_HD static bool action_valid(const Consts&, const ActionT (&a)[kActionDim]) {
    return isfinite(a[0]);
  }

  GV_HD static void reset(const Consts& c, const float (&u)[kResetDraws],
                          float (&s)[kStateDim]) {
    s[0] = gv_uniform_range(u[0], c.reset_low, c.reset_high);
    s[1] = 0.0f;
  }

  GV_HD static bool step(const Consts& c, float (&s)[kStateDim], const ActionT (&a)[kActionDim],
                         float* reward) {
    const float raw = a[0];
    const float force = gv_clamp(raw, c.min_action, c.max_action);
    float velocity = s[1] + (force * c.power - c.gravity * gv_cosf(3.0f * s[0]));
    velocity = gv_clamp(velocity, -c.max_speed, c.max_speed);
    float position = s[0] + velocity;
    position = gv_clamp(position, c.min_position, c.max_position);
    if (position == c.min_position && velocity < 0.0f) velocity = 0.0f;
    const bool terminated = position >= c.goal_position && velocity >= c.goal_velocity;
    const float bonus = terminated ? c.goal_reward : 0.0f;
    *reward = bonus - (raw * raw) * c.action_cost;
    s[0] = position;
    s[1] = velocity;
    return terminated;
  }

  GV_HD static void observe(const Consts&, const float (&s)[kStateDim], float (&o)[kObsDim]) {
    o[0] = s[0];
    o[1] = s[1];
  }
};

GV_DEFINE_KERNELS(mountain_car_continuous, MountainCarContinuous)
