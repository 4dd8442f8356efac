#!/bin/bash
# The GPU check of a pip user's machine: nvcc hidden and PyCUDA uninstalled
# (scripts/gpu_hide_toolkit.sh), then the cold-cache start-up, every `-m gpu` test
# (NVRTC-compiled kernels, driver-API launches) and compute-sanitizer memcheck and
# racecheck (classic kernels here; Tag's inside its tests; the fused PPO kernels).
#   bash scripts/gpu_nvrtc_check.sh OUT_DIR
out="${1:-gpu_nvrtc_check}"
mkdir -p "$out"
source scripts/gpu_hide_toolkit.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader
echo "== cold cache: first make_vec (each in a fresh process and an empty cache)"
export GPU_VECENV_CACHE_DIR=/tmp/gv_cold_cache
rm -rf "$GPU_VECENV_CACHE_DIR"
python3 scripts/first_make_vec.py GPUCartPole-v1 1048576
python3 scripts/first_make_vec.py GPUTag-v0 2000
python3 scripts/first_make_vec.py GPUTag-v0 2000 '{"preset": "warpdrive_training"}'
python3 scripts/first_make_vec.py GPUCartPole-v1 1048576  # now from the cache
echo "== compile every shipped kernel (warms the cache for the test processes)"
gpu-vecenv compile -j 16 2>&1 | tail -4
echo "== GPU tests"
timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -m gpu tests -q -n "${WORKERS:-12}" -rfE \
  -p no:cacheprovider > "$out/gpu_tests.log" 2>&1
echo "pytest exit $?"
grep -E "passed|failed|FAILED|Error|SKIPPED" "$out/gpu_tests.log" | cut -c1-220 | tail -30
echo "== sanitizer: classic kernels"
timeout "${SANITIZE_TIMEOUT:-150}" python3 scripts/gpu_sanitize.py --log-dir "$out"
echo "sanitizer exit $?"
echo "== sanitizer: fused PPO kernels (memcheck, racecheck)"
for tool in memcheck racecheck; do
  timeout "${SANITIZE_TIMEOUT:-150}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
    python3 -m pytest -q -p no:cacheprovider tests/train/test_fused_gpu.py \
    -k "partial-tile or act or values or gae" > "$out/sanitize_fused_$tool.log" 2>&1
  echo "$tool exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' \
    "$out/sanitize_fused_$tool.log" | tail -2 | tr '\n' ' ')"
done
