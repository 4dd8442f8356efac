#!/bin/bash
# One lease of a 4-GPU machine in three calls (each under the 10-minute limit; the machine
# stays warm between them, and what runs under setsid outlives a call):
#   start: kernel cache, Tag kernel GPU tests, scaling on 1, 2 and 4 GPUs
#          (scripts/bench_distributed.py), then the three speed-ratio Tag configs start in
#          the background, one per GPU 1-3 (scripts/gpu_tag_speed_ratios.sh)
#   tests: on GPU 0 while they train: the GPU suite and the sanitizers (gpu_tests.sh), then
#          this tree against .bench-before (gpu_refactor_bench.sh)
#   collect: waits for the speed-ratio runs, packs everything into $OUT
#   source .device-kit/setup.sh; bash scripts/lab/gpu_x4_session.sh start|tests|collect
# Logs and results gather in /tmp/x4 (kept between calls on the warm machine).
stage="$1"
x4=/tmp/x4
mkdir -p "$x4"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
left() { echo $(( $1 - SECONDS )); }  # seconds left of a $1-second call

case "$stage" in
start)
  nvidia-smi -L | tee "$x4/gpus.txt"
  echo "== compile every kernel once"
  gpu-vecenv compile -j 32 2>&1 | tail -2
  echo "== Tag kernel GPU tests ($SECONDS s)"
  timeout 170 python3 -m pytest -m gpu -q -n 8 -p no:cacheprovider -rfE \
    tests/gpu/test_tag_kernels.py tests/gpu/test_tag_packed.py \
    tests/gpu/test_tag_scan_helpers.py tests/gpu/test_tag_sanitizer.py \
    > "$x4/tag_kernel_tests.log" 2>&1
  kernels=$?
  echo "pytest exit $kernels"; tail -4 "$x4/tag_kernel_tests.log" | cut -c1-300
  echo "== scaling, 1, 2 and 4 GPUs ($SECONDS s)"
  timeout "$(left 470)" python3 scripts/bench_distributed.py "$x4/distributed.json" \
    --gpus 1,2,4 --seeds 1,2,3 > "$x4/bench_distributed.log" 2>&1
  echo "bench exit $? ($SECONDS s)"
  grep '^{"config": "\(cartpole\|tag\)_ppo", "world\|^{"world' "$x4/bench_distributed.log" \
    | cut -c1-260
  extra=""
  [ "$kernels" = 0 ] || extra="--set trainer.backend=torch"  # the reference, if kernels fail
  echo "== speed ratios start on GPUs 1-3 (extra: '$extra') ($SECONDS s)"
  GPUS="1 2 3" TRAIN_TIMEOUT="${TRAIN_TIMEOUT:-600}" EXTRA_TRAIN_ARGS="$extra" setsid nohup \
    bash scripts/gpu_tag_speed_ratios.sh "$x4/sr" > "$x4/sr.log" 2>&1 < /dev/null &
  sleep 45
  for c in tag_taggers_fast tag_same_speed tag_runners_fast; do
    echo "$c: $(tail -c 300 /tmp/runs/$c/metrics.jsonl 2>/dev/null | tail -1 | cut -c1-200)"
  done
  cp "$x4"/*.log "$x4"/*.json "$x4/gpus.txt" "$OUT/" 2>/dev/null
  ;;
tests)
  echo "== GPU suite and sanitizers on GPU 0"
  CUDA_VISIBLE_DEVICES=0 WORKERS=12 TEST_TIMEOUT=400 SANITIZE_TIMEOUT=120 \
    bash scripts/lab/gpu_tests.sh "$x4/gpu_tests"
  echo "== refactor bench on GPU 0 ($SECONDS s)"
  CUDA_VISIBLE_DEVICES=0 ROUNDS=1 timeout "$(left 560)" \
    bash scripts/lab/gpu_refactor_bench.sh "$x4/refactor"
  echo "refactor bench exit $? ($SECONDS s)"
  for c in tag_taggers_fast tag_same_speed tag_runners_fast; do
    echo "$c: $(tail -1 /tmp/runs/$c/metrics.jsonl 2>/dev/null | cut -c1-300)"
  done
  (cd "$x4" && tar czf "$OUT/gpu_tests.tar.gz" gpu_tests refactor* 2>/dev/null)
  ;;
collect)
  while ! grep -q "^done" "$x4/sr/summary.txt" 2>/dev/null && [ "$SECONDS" -lt "${WAIT:-540}" ]; do
    sleep 5
  done
  cat "$x4/sr/summary.txt" 2>/dev/null || tail -20 "$x4/sr.log"
  (cd "$x4" && tar czf "$OUT/speed_ratios.tar.gz" sr sr.log)
  ls -la "$OUT"
  ;;
*)
  echo "usage: gpu_x4_session.sh start|tests|collect"; exit 2
  ;;
esac
