#!/bin/bash
# The GPU check of a pip user's machine: nvcc hidden and PyCUDA uninstalled
# (scripts/lab/gpu_hide_toolkit.sh), then a first make_vec on an empty cache, and
# scripts/lab/gpu_tests.sh: every `-m gpu` test (NVRTC-compiled kernels, driver-API launches),
# compute-sanitizer memcheck and racecheck.
#   bash scripts/lab/gpu_nvrtc_check.sh OUT_DIR
out="${1:-gpu_nvrtc_check}"
mkdir -p "$out"
source scripts/lab/gpu_hide_toolkit.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader
echo "== cold cache: first make_vec (each in a fresh process and an empty cache)"
export GPU_VECENV_CACHE_DIR=/tmp/gv_cold_cache
rm -rf "$GPU_VECENV_CACHE_DIR"
python3 scripts/first_make_vec.py GPUCartPole-v1 1048576
python3 scripts/first_make_vec.py GPUTag-v0 2000
python3 scripts/first_make_vec.py GPUTag-v0 2000 '{"preset": "warpdrive_training"}'
python3 scripts/first_make_vec.py GPUCartPole-v1 1048576  # now from the cache
bash scripts/lab/gpu_tests.sh "$out"
