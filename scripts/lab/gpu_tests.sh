#!/bin/bash
# Every shipped kernel compiled once (warming the cache for the test processes), every
# `-m gpu` test in parallel processes (pytest-xdist; those marked whole_gpu, which fill the
# GPU's memory, alone after the others), compute-sanitizer memcheck and
# racecheck over the classic kernels (Tag's run inside its tests) and the fused PPO
# kernels. Logs go to $1. Used by gpu_all.sh and gpu_nvrtc_check.sh.
#   bash scripts/lab/gpu_tests.sh OUT_DIR
out="${1:-gpu_tests}"
mkdir -p "$out"
echo "== compile every kernel once"
gpu-vecenv compile -j 16 | tail -3
echo "== GPU tests"
timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -m "gpu and not whole_gpu" tests -q \
  -n "${WORKERS:-12}" -rfE -p no:cacheprovider > "$out/gpu_tests.log" 2>&1
echo "pytest exit $?"
grep -E "passed|failed|FAILED|Error|SKIPPED" "$out/gpu_tests.log" | cut -c1-220 | tail -30
echo "== GPU tests that fill the GPU's memory, alone"
timeout 200 python3 -m pytest -m "gpu and whole_gpu" tests -q -rfE -p no:cacheprovider \
  > "$out/gpu_tests_whole_gpu.log" 2>&1
echo "pytest exit $?"
grep -E "passed|failed|FAILED|Error|SKIPPED" "$out/gpu_tests_whole_gpu.log" | cut -c1-220 | tail -10
[ "${SANITIZE:-1}" = 0 ] && exit 0  # SANITIZE=0: the tests only
echo "== sanitizer: classic kernels"
timeout "${SANITIZE_TIMEOUT:-150}" python3 scripts/lab/gpu_sanitize.py --log-dir "$out"
echo "sanitizer exit $?"
echo "== sanitizer: fused PPO kernels (memcheck, racecheck)"
for tool in memcheck racecheck; do
  timeout "${SANITIZE_TIMEOUT:-150}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
    python3 -m pytest -q -p no:cacheprovider tests/train/test_fused_gpu.py \
    -k "partial-tile or act or values or gae" > "$out/sanitize_fused_$tool.log" 2>&1
  echo "$tool exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' \
    "$out/sanitize_fused_$tool.log" | tail -2 | tr '\n' ' ')"
done
