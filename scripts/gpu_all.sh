#!/bin/bash
# The whole GPU check in one call (a CUDA machine with pytest-xdist and the test extras):
# every `-m gpu` test (in parallel processes), compute-sanitizer over the classic kernels (Tag's run inside its tests), and
# the benchmarks of the envs, the trainer (CUDA graphs; scripts/gpu_trainer.sh compares
# with eager and trains Tag) and the adapters. Results go to $1.
#   bash scripts/gpu_all.sh OUT_DIR
out="${1:-gpu_all}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader
echo "== compile every kernel once (warms the cache for the test processes)"
gpu-vecenv compile -j 16 | tail -3
echo "== GPU tests"
timeout "${TEST_TIMEOUT:-230}" python3 -m pytest -m gpu tests -q -n "${WORKERS:-12}" -rfE \
  -p no:cacheprovider > "$out/gpu_tests.log" 2>&1
echo "pytest exit $?"
grep -E "passed|failed|FAILED|Error" "$out/gpu_tests.log" | cut -c1-220 | tail -30
echo "== sanitizer"
mkdir -p /tmp/sanitize
timeout "${SANITIZE_TIMEOUT:-80}" python3 scripts/gpu_sanitize.py --log-dir /tmp/sanitize
echo "sanitizer exit $?"
echo "== sanitizer: fused PPO kernels (memcheck, racecheck)"
for tool in memcheck racecheck; do
  timeout "${SANITIZE_TIMEOUT:-120}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
    python3 -m pytest -q -p no:cacheprovider tests/train/test_fused_gpu.py \
    -k "partial-tile or act or values or gae" > "$out/sanitize_fused_$tool.log" 2>&1
  echo "$tool exit $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' \
    "$out/sanitize_fused_$tool.log" | tail -2 | tr '\n' ' ')"
done
echo "== bench: CartPole, cuda"
timeout 60 python3 -m gpu_vecenv.bench --env GPUCartPole-v1 --backend cuda --repeats 3 \
  --json "$out/bench_cartpole.json" 2>&1 | tail -8
echo "== bench: trainer"
timeout "${TRAIN_TIMEOUT:-200}" python3 scripts/bench_train.py "$out/bench_train.json" \
  ${TRAIN_ARGS:---graphs true --iterations 100} 2>&1 | tail -15
echo "== bench: adapters"
timeout 35 python3 scripts/bench_adapters.py "$out/bench_adapters.json" --steps 300 \
  --rounds 5 2>&1 | tail -10
