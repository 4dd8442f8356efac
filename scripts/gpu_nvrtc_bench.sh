#!/bin/bash
# The NVRTC + driver-API path against the nvcc + PyCUDA path, in one call on one GPU:
#   1. the code before NVRTC (a `git archive` of it in .bench-before/, carried) with nvcc
#      and PyCUDA installed: env, Tag and (STAGES has "train") trainer benchmarks;
#   2. this tree: per-launch host cost with PyCUDA still installed (scripts/bench_launch.py);
#   3. nvcc hidden and PyCUDA uninstalled (scripts/gpu_hide_toolkit.sh): the same
#      benchmarks, then a side-by-side table (scripts/compare_paths.py).
#   bash scripts/gpu_nvrtc_bench.sh OUT_DIR      (STAGES="envs train torch", default all)
out="$(realpath -m "${1:-gpu_nvrtc_bench}")"
mkdir -p "$out"
stages="${STAGES:-envs train torch}"
sizes="${SIZES:-1,1024,16384,262144,1048576,4194304}"
bench() {  # $1 = before|after, run in the tree to measure
  local first="${SCRIPTS:-scripts}/first_make_vec.py"
  GPU_VECENV_CACHE_DIR="/tmp/gv_cold_$1" python3 "$first" GPUCartPole-v1 1048576
  GPU_VECENV_CACHE_DIR="/tmp/gv_cold_$1" python3 "$first" GPUTag-v0 2000 \
    '{"preset": "warpdrive_training"}'
  rm -rf "/tmp/gv_cold_$1"
  python3 -m gpu_vecenv.bench --env GPUCartPole-v1 GPUPendulum-v1 --backend cuda \
    --sizes "$sizes" --repeats 3 --json "$out/bench_$1.json" > "$out/bench_$1.log" 2>&1
  echo "bench $1 exit $?"
  if [[ $stages == *envs* ]]; then
    python3 scripts/bench_tag.py --json "$out/bench_tag_$1.json" > "$out/bench_tag_$1.log" 2>&1
    echo "bench_tag $1 exit $?"
  fi
  if [[ $stages == *train* ]]; then
    timeout 240 python3 scripts/bench_train.py "$out/bench_train_$1.json" --graphs true \
      --modes throughput,time_to_475 --iterations 100 > "$out/bench_train_$1.log" 2>&1
    echo "bench_train $1 exit $?"
  fi
  if [[ $stages == *torch* && -f "${SCRIPTS:-scripts}/bench_torch_backend.py" ]]; then
    python3 "${SCRIPTS:-scripts}/bench_torch_backend.py" --json "$out/bench_torch_$1.json" \
      > "$out/bench_torch_$1.log" 2>&1
    echo "bench_torch $1 exit $?"
  fi
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader
echo "== before: nvcc + PyCUDA"
python3 -m pip install -q --no-deps --no-build-isolation -e .bench-before || exit 1
here="$PWD"
(cd .bench-before && GPU_VECENV_CACHE_DIR=/tmp/gv_cache_before \
  SCRIPTS="$here/scripts" bench before)
echo "== after: this tree; launch cost with PyCUDA still installed"
python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 1
export GPU_VECENV_CACHE_DIR=/tmp/gv_cache_after
gpu-vecenv compile -j 16 | tail -1
python3 scripts/bench_launch.py --json "$out/bench_launch.json"
source scripts/gpu_hide_toolkit.sh || exit 1
bench after
python3 scripts/compare_paths.py "$out"
