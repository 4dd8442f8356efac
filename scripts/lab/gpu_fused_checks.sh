#!/bin/bash
# The fused PPO kernels on the GPU machine, one call: their GPU tests, the update's kernels
# timed against an earlier tree's (scripts/lab/bench_fused_update.py; BEFORE_TREE, default
# .bench-b, carried; BEFORE_VARIANTS, default 0, and VARIANTS, default "0 1 3", as that
# script takes them), compute-sanitizer memcheck and racecheck over their tests (SANITIZE_K:
# which, as pytest -k), and PPO
# CartPole against PureJaxRL's throughput (PJX_REPEATS alternating runs a side, default 3;
# PJX_MODES, default throughput; PJX=0 skips it; carry .whl for flax/optax).
#   source .device-kit/setup.sh; bash scripts/lab/gpu_fused_checks.sh
# Output: $OUT/fused_checks.tar.gz.
d=/tmp/fused_checks; rm -rf "$d"; mkdir -p "$d"
trap 'tar czf "$OUT/fused_checks.tar.gz" -C /tmp fused_checks' EXIT
export PYTHONUNBUFFERED=1
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/train/test_fused_gpu.py \
  > "$d/fused_tests.log" 2>&1
echo "fused tests: $(tail -1 "$d/fused_tests.log")"
before="${BEFORE_TREE:-.bench-b}"
if [ -d "$before" ]; then
  source scripts/lab/earlier_tree.sh
  link_earlier_tree "$before"
  (cd "$before" && PYTHONPATH="$PWD" timeout 200 python3 ../scripts/lab/bench_fused_update.py \
    "$d/bench_update_before.json" --variants "${BEFORE_VARIANTS:-0}" > "$d/bench_update_before.log" 2>&1)
fi
timeout 200 python3 scripts/lab/bench_fused_update.py "$d/bench_update.json" \
  --variants "${VARIANTS:-0 1 3}" > "$d/bench_update.log" 2>&1
cat "$d/bench_update_before.log" "$d/bench_update.log" 2>/dev/null | grep -v Warn
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 1 \
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/train/test_fused_gpu.py \
    -k "${SANITIZE_K:-partial-tile or act or values or gae}" > "$d/sanitize_fused_$tool.log" 2>&1
  echo "sanitizer $tool exit $?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" \
    "$d/sanitize_fused_$tool.log" | tail -2 | tr '\n' ' ')"
done
if [ "${PJX:-1}" = 1 ]; then
  source .device-kit/peers/setup.sh
  for mod in flax optax chex msgpack treescope absl toolz; do
    python3 -c "import $mod" 2>/dev/null && continue
    wheel=$(ls .whl/"${mod/absl/absl_py}"-*.whl 2>/dev/null | head -1)
    [ -n "$wheel" ] && python3 -m pip install -q --no-index --no-deps --no-compile \
      --no-cache-dir --target "$PEERS_PATH" "$wheel"
  done
  PYTHONPATH=$PEERS_PATH timeout "${PJX_TIMEOUT:-300}" python3 scripts/bench_vs_purejaxrl.py \
    "$d/vs_purejaxrl.json" --sizes 2048,16384 --repeats "${PJX_REPEATS:-3}" \
    --modes "${PJX_MODES:-throughput}" > "$d/vs_purejaxrl.log" 2>&1
  echo "purejaxrl exit $?"; tail -8 "$d/vs_purejaxrl.log" | cut -c1-200
fi
