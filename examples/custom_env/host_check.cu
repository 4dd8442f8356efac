// Runs PointReach's kernel math (the GV_HD functions of point_reach.cu) on the CPU, so the
// state-injection test can compare it with the torch reference on a machine without a GPU.
//
//   stdin:  n, then n lines "position velocity target action" (floats as C99 hex, %a)
//   stdout: n lines "position velocity target reward terminated obs0 obs1 obs2"
//   argv:   force dt max_speed goal_tolerance speed_tolerance (hex floats), or "layout" to
//           print the Consts layout text instead
#include <cstdio>
#include <cstdlib>

#include "point_reach.cu"

int main(int argc, char** argv) {
  if (argc == 2) {  // "layout": the Consts layout the kernels export (point_reach_consts_layout)
    fputs(PointReach::kConstsLayout, stdout);
    return 0;
  }
  if (argc != 6) return 2;
  PointReach::Consts c;
  float* fields[5] = {&c.force, &c.dt, &c.max_speed, &c.goal_tolerance, &c.speed_tolerance};
  for (int k = 0; k < 5; ++k) *fields[k] = strtof(argv[k + 1], nullptr);
  int n = 0;
  if (scanf("%d", &n) != 1) return 2;
  for (int i = 0; i < n; ++i) {
    float s[3];
    long long a[1];
    if (scanf("%a %a %a %lld", &s[0], &s[1], &s[2], &a[0]) != 4) return 2;
    float reward = 0.0f;
    const bool terminated = PointReach::step(c, s, a, &reward);
    float o[3];
    PointReach::observe(c, s, o);
    printf("%a %a %a %a %d %a %a %a\n", s[0], s[1], s[2], reward, terminated ? 1 : 0, o[0], o[1],
           o[2]);
  }
  return 0;
}
