#!/bin/bash
# Several GPUs in one call (a machine with 2 or more): the data-parallel GPU tests, the
# shipped command on 2 GPUs timed from start to exit, a run stopped by SIGTERM and resumed,
# and flat all-reduce against DDP. Logs and JSON go to $1.
#   bash scripts/gpu_distributed.sh OUT_DIR
out="${1:-gpu_distributed}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L
echo "== GPU tests of data-parallel runs (2 ranks)"
timeout "${TESTS_TIMEOUT:-420}" python3 -m pytest -q -m gpu tests/train/test_distributed_gpu.py \
  -rA -s -p no:cacheprovider 2>&1 | tee "$out/test_distributed_gpu.log" | tail -40
echo "== gpu-vecenv train cartpole_ppo --gpus 2: start to exit"
rm -rf /tmp/g2
start=$(date +%s.%N)
timeout 240 gpu-vecenv train cartpole_ppo --gpus 2 --run-dir /tmp/g2 --no-progress \
  > "$out/train_gpus2.log" 2>&1
status=$?
end=$(date +%s.%N)
tail -8 "$out/train_gpus2.log"
echo "exit status $status, wall $(python3 -c "print(f'{$end - $start:.1f}')") s"
echo "== SIGTERM to gpu-vecenv train --gpus 2, then --resume"
rm -rf /tmp/g2term
gpu-vecenv train cartpole_ppo --gpus 2 --run-dir /tmp/g2term --no-progress \
  --num-envs 4096 --total-steps 2000000000 --set trainer.stop_at_return=null \
  > "$out/sigterm_gpus2.log" 2>&1 &
pid=$!
for _ in $(seq 1 120); do
  [ -f /tmp/g2term/metrics.jsonl ] && [ "$(wc -l < /tmp/g2term/metrics.jsonl)" -ge 20 ] && break
  sleep 0.5
done
sent=$(date +%s.%N)
kill -TERM $pid
wait $pid
status=$?
end=$(date +%s.%N)
tail -6 "$out/sigterm_gpus2.log"
echo "exit status $status, $(python3 -c "print(f'{$end - $sent:.1f}')") s after SIGTERM"
step=$(python3 -c "import torch; print(torch.load('/tmp/g2term/checkpoints/latest.pt', weights_only=False)['counters']['global_step'])")
timeout 240 gpu-vecenv train --gpus 2 --resume /tmp/g2term --no-progress \
  --total-steps $((step + 2 * 4096 * 32 * 20)) > "$out/resume_gpus2.log" 2>&1
echo "resume exit status $?"
tail -4 "$out/resume_gpus2.log"
echo "== flat all-reduce vs DDP"
timeout 240 torchrun --standalone --nproc-per-node 2 scripts/bench_grad_sync.py \
  "$out/grad_sync.json" 2>&1 | grep -v "^W1\|OMP_NUM" | tail -8
