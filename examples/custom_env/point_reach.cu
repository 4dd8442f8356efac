// PointReach (examples/custom_env/point_reach.py), one thread per env. Mirrors the torch
// reference operation by operation in float32; built with -fmad=false like every kernel.
#include "common/single_agent_kernels.cuh"

// The kernels' constants, in the order kernel_consts() in point_reach.py packs them. GV_CONSTS
// declares the struct Consts from this list and GV_DEFINE_KERNELS exports the list, which the
// CUDA backend checks against kernel_consts() when it loads this file.
#define POINT_REACH_CONSTS(FIELD) \
  FIELD(float, force)             \
  FIELD(float, dt)                \
  FIELD(float, max_speed)         \
  FIELD(float, goal_tolerance)    \
  FIELD(float, speed_tolerance)

struct PointReach {
  static constexpr int kStateDim = 3;  // position, velocity, target (state_fields order)
  static constexpr int kObsDim = 3;
  static constexpr int kResetDraws = 2;
  static constexpr int kActionDim = 1;
  typedef long long ActionT;  // Discrete(3)

  GV_CONSTS(POINT_REACH_CONSTS);

  GV_HD static bool action_valid(const Consts&, const ActionT (&a)[kActionDim]) {
    return a[0] >= 0 && a[0] < 3;
  }

  GV_HD static void reset(const Consts&, const float (&u)[kResetDraws],
                          float (&s)[kStateDim]) {
    s[0] = gv_uniform_range(u[0], -1.0f, 1.0f);
    s[1] = 0.0f;
    s[2] = gv_uniform_range(u[1], -1.0f, 1.0f);
  }

  GV_HD static bool step(const Consts& c, float (&s)[kStateDim], const ActionT (&a)[kActionDim],
                         float* reward) {
    const float push = (float)(a[0] - 1) * c.force;
    const float velocity = fminf(fmaxf(s[1] + push * c.dt, -c.max_speed), c.max_speed);
    const float position = fminf(fmaxf(s[0] + velocity * c.dt, -1.0f), 1.0f);
    const float distance = fabsf(position - s[2]);
    *reward = -distance;
    s[0] = position;
    s[1] = velocity;
    return distance < c.goal_tolerance && fabsf(velocity) < c.speed_tolerance;
  }

  GV_HD static void observe(const Consts&, const float (&s)[kStateDim], float (&o)[kObsDim]) {
    o[0] = s[0];
    o[1] = s[1];
    o[2] = s[2] - s[0];
  }
};

GV_DEFINE_KERNELS(point_reach, PointReach)
