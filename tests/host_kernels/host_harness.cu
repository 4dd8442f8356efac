// Runs the kernels' __host__ __device__ code on the CPU, for tests without a GPU.
//
//   host_harness rng  IN OUT   Philox words and uniforms (cuda_src/common/rng.cuh)
//   host_harness sample_discrete|sample_box IN OUT
//                              random actions (sample_actions.cu): one slot per row, the
//                              slot's seed and counter given, num_envs = slots,
//                              max_episode_steps = components per action
//   host_harness ENV  IN OUT   one step / reset / observe of every env in the batch through
//                              the same gv_* functions the kernels call per thread (a step
//                              with envs_per_thread E > 1 goes through gv_step_chunk, one
//                              call per E envs, as GV_ENVS_PER_THREAD=E kernels do; with
//                              prefetch_rng, as <name>_step_small does), or the
//                              env's Consts layout text (op 4)
//
// IN and OUT are flat binary files written and read by tests/host_kernels/harness.py.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "acrobot.cu"
#include "cartpole.cu"
#include "mountain_car.cu"
#include "mountain_car_continuous.cu"
#include "pendulum.cu"
#include "sample_actions.cu"

namespace {

struct Header {
  int op;  // 0 rng, 1 step, 2 reset, 3 observe, 4 the Consts layout
  int num_envs;
  int max_episode_steps;  // rng: the stream
  int autoreset_mode;
  int consts_size;
  int has_mask;
  int envs_per_thread;   // step: 1, 2 or 4
  int state_row_stride;  // floats between state fields in memory (>= num_envs)
  int offset_action;     // step: the actions start one element past an aligned address
  int prefetch_rng;      // step: seeds and RNG counters loaded up front (<name>_step_small)
};

template <class T>
void read_into(FILE* f, std::vector<T>& v, size_t n) {
  v.resize(n);
  if (n && fread(v.data(), sizeof(T), n, f) != n) {
    fprintf(stderr, "short input\n");
    exit(2);
  }
}

template <class T>
void write_from(FILE* f, const std::vector<T>& v) {
  if (!v.empty()) fwrite(v.data(), sizeof(T), v.size(), f);
}

int run_rng(const Header& h, FILE* in, FILE* out) {
  const size_t n = (size_t)h.num_envs;
  std::vector<long long> seed, index, counter;
  read_into(in, seed, n);
  read_into(in, index, n);
  read_into(in, counter, n);
  std::vector<uint32_t> words(n * 8);
  std::vector<float> uniforms(n * 8);
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t block = 0; block < 2; ++block) {
      const GvWords4 w = gv_random_block(seed[i], index[i], counter[i], block,
                                         (uint32_t)h.max_episode_steps);
      for (int lane = 0; lane < 4; ++lane) words[i * 8 + block * 4 + lane] = w.w[lane];
    }
    float u[8];
    gv_random_uniforms<8>(seed[i], index[i], counter[i], (uint32_t)h.max_episode_steps, u);
    for (int k = 0; k < 8; ++k) uniforms[i * 8 + k] = u[k];
  }
  write_from(out, words);
  write_from(out, uniforms);
  return 0;
}

// Seeds (n,) int64, counters (n,) uint32, then low and high (dims,) (int64 start and count,
// or float32); writes (n, dims) actions.
template <class T>
int run_sample(const Header& h, FILE* in, FILE* out) {
  const size_t n = (size_t)h.num_envs, dims = (size_t)h.max_episode_steps;
  std::vector<long long> seed;
  std::vector<unsigned int> counter;
  std::vector<T> low, high, actions(n * dims);
  read_into(in, seed, n);
  read_into(in, counter, n);
  read_into(in, low, dims);
  read_into(in, high, dims);
  for (size_t s = 0; s < n; ++s) {
    if constexpr (sizeof(T) == 8) {
      gv_sample_slot(seed[s], (long long)s, counter[s], (int)dims,
                     GvDiscreteComponents::from_arrays(low.data(), high.data(), (int)dims), actions.data() + s * dims);
    } else {
      gv_sample_slot(seed[s], (long long)s, counter[s], (int)dims,
                     GvBoxComponents::from_arrays(low.data(), high.data(), (int)dims), actions.data() + s * dims);
    }
  }
  write_from(out, actions);
  return 0;
}

template <class Env>
int run_env(const Header& h, FILE* in, FILE* out) {
  if (h.op == 4) {  // the layout text GV_DEFINE_KERNELS exports as <name>_consts_layout
    fputs(GvConstsLayout<Env>::chars(), out);
    return 0;
  }
  typename Env::Consts c;
  if (h.consts_size != (int)sizeof(c)) {
    fprintf(stderr, "consts size mismatch: python packed %d bytes, C struct has %d\n",
            h.consts_size, (int)sizeof(c));
    return 3;
  }
  if (fread(&c, sizeof(c), 1, in) != 1) return 2;
  const int n = h.num_envs;
  const size_t un = (size_t)n;
  std::vector<float> state;
  std::vector<int> elapsed;
  std::vector<long long> rng_counter, seed;
  std::vector<unsigned char> pending_raw, invalid_raw, mask_raw;
  std::vector<typename Env::ActionT> action;
  read_into(in, state, un * Env::kStateDim);
  read_into(in, elapsed, un);
  read_into(in, rng_counter, un);
  read_into(in, seed, un);
  read_into(in, pending_raw, un);
  read_into(in, invalid_raw, un);
  read_into(in, action, un * Env::kActionDim);
  read_into(in, mask_raw, h.has_mask ? un : 0);
  bool* pending = reinterpret_cast<bool*>(pending_raw.data());
  bool* invalid = reinterpret_cast<bool*>(invalid_raw.data());
  int error_count = 0;

  // The fields as rows `state_row_stride` apart: n itself, as in EnvBuffers, or padded so
  // that each row is aligned whatever n is.
  const size_t stride = (size_t)h.state_row_stride;
  std::vector<float> rows(stride * Env::kStateDim + 4, NAN);
  float* rows_base = rows.data() + (4 - ((uintptr_t)rows.data() / sizeof(float)) % 4) % 4;
  GvStatePtrs<Env::kStateDim> sp;
  for (int k = 0; k < Env::kStateDim; ++k) {
    sp.field[k] = rows_base + (size_t)k * stride;
    memcpy(sp.field[k], state.data() + (size_t)k * un, un * sizeof(float));
  }
  GvEnvBuffers b = {elapsed.data(), rng_counter.data(), seed.data(), pending, invalid,
                    &error_count};
  std::vector<float> obs(un * Env::kObsDim, NAN), final_obs(un * Env::kObsDim, NAN);
  std::vector<float> reward(un, NAN);
  std::vector<unsigned char> terminated(un, 7), truncated(un, 7);
  GvStepOutputs o = {obs.data(), reward.data(), reinterpret_cast<bool*>(terminated.data()),
                     reinterpret_cast<bool*>(truncated.data()),
                     h.autoreset_mode == GV_AUTORESET_SAME_STEP ? final_obs.data() : nullptr};
  // The actions one element past an aligned start where asked (an offset view's layout).
  std::vector<typename Env::ActionT> action_rows(action.size() + 4);
  typename Env::ActionT* actions = action_rows.data() + (h.offset_action ? 1 : 0);
  if (!action.empty()) memcpy(actions, action.data(), action.size() * sizeof(action[0]));
  if (h.op == 1) {
    const int e = h.envs_per_thread;
    for (int first = 0; first < n; first += e) {
      if (e == 1) {
        error_count += gv_step_chunk<Env, 1>(c, sp, b, actions, o, first, n,
                                             h.max_episode_steps, h.autoreset_mode,
                                             gv_chunk_layout<Env, 1>(sp, b, actions, o),
                                             h.prefetch_rng != 0);
      } else if (e == 2) {
        error_count += gv_step_chunk<Env, 2>(c, sp, b, actions, o, first, n,
                                             h.max_episode_steps, h.autoreset_mode,
                                             gv_chunk_layout<Env, 2>(sp, b, actions, o),
                                             h.prefetch_rng != 0);
      } else {
        error_count += gv_step_chunk<Env, 4>(c, sp, b, actions, o, first, n,
                                             h.max_episode_steps, h.autoreset_mode,
                                             gv_chunk_layout<Env, 4>(sp, b, actions, o),
                                             h.prefetch_rng != 0);
      }
    }
  }
  for (int i = 0; i < n && h.op != 1; ++i) {
    if (h.op == 2) {
      const bool* mask = h.has_mask ? reinterpret_cast<const bool*>(mask_raw.data()) : nullptr;
      gv_reset_masked_env<Env>(c, sp, b, mask, obs.data(), i);
    } else {
      gv_observe_env<Env>(c, sp, obs.data(), i);
    }
  }
  for (int k = 0; k < Env::kStateDim; ++k) {
    memcpy(state.data() + (size_t)k * un, sp.field[k], un * sizeof(float));
  }
  write_from(out, state);
  write_from(out, elapsed);
  write_from(out, rng_counter);
  write_from(out, pending_raw);
  write_from(out, invalid_raw);
  fwrite(&error_count, sizeof(int), 1, out);
  write_from(out, obs);
  write_from(out, reward);
  write_from(out, terminated);
  write_from(out, truncated);
  write_from(out, final_obs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s rng|ENV IN OUT\n", argv[0]);
    return 1;
  }
  FILE* in = fopen(argv[2], "rb");
  FILE* out = fopen(argv[3], "wb");
  if (!in || !out) return 1;
  Header h;
  if (fread(&h, sizeof(h), 1, in) != 1) return 2;
  const char* env = argv[1];
  int rc = 1;
  if (!strcmp(env, "rng")) rc = run_rng(h, in, out);
  else if (!strcmp(env, "sample_discrete")) rc = run_sample<long long>(h, in, out);
  else if (!strcmp(env, "sample_box")) rc = run_sample<float>(h, in, out);
  else if (!strcmp(env, "cartpole")) rc = run_env<CartPole>(h, in, out);
  else if (!strcmp(env, "acrobot")) rc = run_env<Acrobot>(h, in, out);
  else if (!strcmp(env, "mountain_car")) rc = run_env<MountainCar>(h, in, out);
  else if (!strcmp(env, "mountain_car_continuous")) rc = run_env<MountainCarContinuous>(h, in, out);
  else if (!strcmp(env, "pendulum")) rc = run_env<Pendulum>(h, in, out);
  else fprintf(stderr, "unknown env %s\n", env);
  fclose(in);
  fclose(out);
  return rc;
}
