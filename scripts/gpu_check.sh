#!/bin/bash
# The whole GPU check of the CUDA backend in one go (on a CUDA machine):
# GPU tests, compute-sanitizer, and a benchmark. Logs and JSON go to $1 (default: gpu_check/).
#   bash scripts/gpu_check.sh OUT_DIR
out="${1:-gpu_check}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader
echo "== GPU tests"
timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -m gpu tests/gpu -q -s -p no:cacheprovider \
  > "$out/gpu_tests.log" 2>&1
echo "pytest exit $?"
grep -E "bit-identical|steps x|passed|failed|FAILED|Error" "$out/gpu_tests.log" | cut -c1-200 | tail -70
echo "== sanitizer"
timeout "${SANITIZE_TIMEOUT:-150}" python3 scripts/gpu_sanitize.py --log-dir "$out"
echo "== bench"
timeout "${BENCH_TIMEOUT:-120}" python3 -m gpu_vecenv.bench --env all --backend cuda \
  --repeats 3 --json "$out/bench_cuda.json" --plot "$out/bench_cuda.png" > "$out/bench.log" 2>&1
echo "bench exit $?"
timeout "${BENCH_TIMEOUT:-120}" python3 -m gpu_vecenv.bench --env GPUCartPole-v1 --backend torch \
  --repeats 3 --vs gymnasium --json "$out/bench_torch_gym.json" >> "$out/bench.log" 2>&1
echo "bench 2 exit $?"
grep -v "^\s*$" "$out/bench.log" | cut -c1-110 | tail -48
