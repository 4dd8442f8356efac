#!/bin/bash
# The trainer on a GPU in one call: PPO benchmarks (CartPole at 2,048 and 16,384 envs,
# Tag at 2,000 games x 105 agents; CUDA graphs on and off) and the shipped Tag run
# (tag_ppo: WarpDrive's training preset) evaluated against random play. Results go to $1.
#   bash scripts/gpu_trainer.sh OUT_DIR
out="${1:-gpu_trainer}"
mkdir -p "$out"
run="${TAG_RUN_DIR:-/tmp/tag_ppo_run}"
echo "== bench: PPO CartPole"
timeout "${CARTPOLE_TIMEOUT:-240}" python3 scripts/bench_train.py "$out/bench_train.json" \
  --iterations "${CARTPOLE_ITERATIONS:-60}" 2>&1 | tail -14
echo "== bench: PPO Tag, 2,000 games x 105 agents"
timeout "${TAG_BENCH_TIMEOUT:-150}" python3 scripts/bench_train.py "$out/bench_tag_train.json" \
  --env GPUTag-v0 --sizes 2000 --iterations "${TAG_ITERATIONS:-20}" \
  --modes breakdown,throughput \
  --env-kwargs '{"preset": "warpdrive_training", "num_taggers": 5, "num_runners": 100}' \
  2>&1 | tail -6
echo "== train: tag_ppo"
rm -rf "$run"
timeout "${TAG_TRAIN_TIMEOUT:-180}" gpu-vecenv train tag_ppo --run-dir "$run" --no-progress \
  --set trainer.eval_episodes=0 ${TAG_TRAIN_ARGS:-} 2>&1 | tail -3
cp "$run/metrics.jsonl" "$out/tag_metrics.jsonl"
tail -1 "$run/metrics.jsonl" | cut -c1-600
echo "== eval: trained vs random (100 games each, sampled actions)"
for what in trained random runner; do
  case $what in
    trained) extra=();; random) extra=(--random);; runner) extra=(--random runner);;
  esac
  timeout 60 gpu-vecenv eval "$run" --episodes 100 --stochastic "${extra[@]}" \
    --json "$out/tag_eval_$what.json" 2>&1 | tail -4
done
