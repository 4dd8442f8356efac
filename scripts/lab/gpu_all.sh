#!/bin/bash
# The whole GPU check in one call (a CUDA machine with pytest-xdist and the test extras):
# scripts/lab/gpu_tests.sh (every `-m gpu` test, compute-sanitizer), then the benchmarks of the
# envs, the trainer (CUDA graphs; scripts/gpu_trainer.sh compares
# with eager and trains Tag) and the adapters. Results go to $1.
#   bash scripts/lab/gpu_all.sh OUT_DIR
out="${1:-gpu_all}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader
bash scripts/lab/gpu_tests.sh "$out"
echo "== bench: CartPole, cuda"
timeout 60 python3 -m gpu_vecenv.bench --env GPUCartPole-v1 --backend cuda --repeats 3 \
  --json "$out/bench_cartpole.json" 2>&1 | tail -8
echo "== bench: trainer"
timeout "${TRAIN_TIMEOUT:-200}" python3 scripts/bench_train.py "$out/bench_train.json" \
  ${TRAIN_ARGS:---graphs true --iterations 100} 2>&1 | tail -15
echo "== bench: adapters"
timeout 35 python3 scripts/bench_adapters.py "$out/bench_adapters.json" --steps 300 \
  --rounds 5 2>&1 | tail -10
