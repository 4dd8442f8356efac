// An env's kernel constants, declared once as a list of fields: GV_CONSTS turns it into the
// C struct the kernels take and into a text table of that struct, which GV_DEFINE_KERNELS
// exports as the __device__ string <name>_consts_layout. The loader reads it and checks it
// against the env's Python binding (gpu_vecenv/kernel_binding.py), so a field added, moved
// or retyped on one side only fails at load with both sides named, instead of shifting
// every constant after it.
//
//   #define CARTPOLE_CONSTS(FIELD) FIELD(float, gravity) FIELD(float, masspole) ...
//   struct CartPole {
//     GV_CONSTS(CARTPOLE_CONSTS);
//     ...
//   };
//
// declares `struct Consts { float gravity; float masspole; ... };` and
// `kConstsLayout = "float gravity;float masspole;..."`. Field types are float or int:
// the binding packs np.float32 as float and Python ints as int, 4 bytes each.
#pragma once

#define GV_CONST_MEMBER(type, name) type name;
#define GV_CONST_TEXT(type, name) #type " " #name ";"
#define GV_CONSTS(LIST)   \
  struct Consts {         \
    LIST(GV_CONST_MEMBER) \
  };                      \
  static constexpr char kConstsLayout[] = LIST(GV_CONST_TEXT)

// Env::kConstsLayout, or "" for an Env whose Consts was written out by hand (a custom env
// from before GV_CONSTS): the loader then warns that it cannot check the packing.
template <class Env, class = void>
struct GvConstsLayout {
  static constexpr int kSize = 1;
  __host__ __device__ static constexpr const char* chars() { return ""; }
};
template <class Env>
struct GvConstsLayout<Env, decltype(void(Env::kConstsLayout))> {
  static constexpr int kSize = sizeof(Env::kConstsLayout);
  __host__ __device__ static constexpr const char* chars() { return Env::kConstsLayout; }
};

// The layout text as a value (a __device__ variable needs a constant initializer, and an
// array member cannot be initialized from a pointer).
template <int kSize>
struct GvConstsText {
  char text[kSize];
};

template <class Env>
__host__ __device__ constexpr GvConstsText<GvConstsLayout<Env>::kSize> gv_consts_text() {
  GvConstsText<GvConstsLayout<Env>::kSize> out{};
  const char* chars = GvConstsLayout<Env>::chars();
  for (int k = 0; k < GvConstsLayout<Env>::kSize; ++k) out.text[k] = chars[k];
  return out;
}
