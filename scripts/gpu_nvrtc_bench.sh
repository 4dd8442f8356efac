#!/bin/bash
# The NVRTC + driver-API path against the nvcc + PyCUDA path, on one GPU in one call:
# - before: the code before NVRTC (a `git archive` of it in .bench-before/, carried), nvcc
#   and PyCUDA installed; after: this tree with nvcc hidden and PyCUDA uninstalled
#   (scripts/gpu_hide_toolkit.sh);
# - GPU-bound points (CartPole/Pendulum at 256k-4M envs, Tag's large cases), the trainer
#   and the torch backend once per side; the host-bound points (1-16,384 envs, Tag's
#   small cases) in ROUNDS alternating rounds, since host timings on this VM drift by tens
#   of percent from one run to the next; then a side-by-side table of medians
#   (scripts/compare_paths.py); also per-launch host costs (scripts/bench_launch.py) and a
#   cold-cache first make_vec on each side.
#   bash scripts/gpu_nvrtc_bench.sh OUT_DIR   (STAGES="large small train torch", ROUNDS=3)
out="$(realpath -m "${1:-gpu_nvrtc_bench}")"
mkdir -p "$out"
stages="${STAGES:-large small train torch}"
here="$PWD"
source scripts/gpu_hide_toolkit.sh > /dev/null && restore_toolkit || exit 1
use() {  # $1 = before | after
  if [ "$1" = before ]; then
    restore_toolkit
    python3 -m pip install -q --no-deps --no-build-isolation -e .bench-before || exit 1
    tree=.bench-before; export GPU_VECENV_CACHE_DIR=/tmp/gv_cache_before
  else
    python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 1
    hide_toolkit > /dev/null || exit 1
    tree=.; export GPU_VECENV_CACHE_DIR=/tmp/gv_cache_after
  fi
}
source "$here/scripts/bench_sides.sh"  # run, classic, tag
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader
for side in before after; do
  use $side
  echo "== $side"
  export GPU_VECENV_CACHE_DIR=/tmp/gv_cold_$side  # empty: a first use compiles
  run python3 "$here/scripts/first_make_vec.py" GPUCartPole-v1 1048576
  run python3 "$here/scripts/first_make_vec.py" GPUTag-v0 2000 '{"preset": "warpdrive_training"}'
  export GPU_VECENV_CACHE_DIR=/tmp/gv_cache_$side  # back to the side's warm cache
  if [[ $stages == *large* ]]; then
    classic $side 1048576,4194304 _large
    tag $side "tag 2000x105,tag 200x1000,tag 1x16384" _large
  fi
  if [[ $stages == *train* ]]; then
    run timeout 200 python3 scripts/bench_train.py "$out/bench_train_$side.json" --graphs true \
      --modes throughput,time_to_475 --iterations 100 > "$out/bench_train_$side.log" 2>&1 \
      || echo "bench_train $side failed"
  fi
  if [[ $stages == *torch* ]]; then  # the torch backend (fallback), GPU and this CPU
    compiled=$([ $side = after ] && echo --compile)
    for device in cuda cpu; do
      run python3 "$here/scripts/bench_torch_backend.py" --device $device $compiled \
        --repeats 3 --seconds 0.2 --json "$out/bench_torch_${device}_$side.json" \
        > "$out/bench_torch_${device}_$side.log" 2>&1 || echo "bench_torch $device $side failed"
    done
  fi
done
if [[ $stages == *small* ]]; then
  for round in $(seq "${ROUNDS:-3}"); do
    for side in before after; do
      use $side
      classic $side 1,1024,16384,262144 "_r$round"
      tag $side "tag 1x5,tag 2000x5,grid 1x5,grid 2000x5" "_r$round"
    done
  done
  restore_toolkit
  python3 scripts/bench_launch.py --json "$out/bench_launch.json"
fi
python3 scripts/compare_paths.py "$out"
