#!/bin/bash
# Tag at WarpDrive's three speed ratios on one GPU: trains tag_taggers_fast, tag_same_speed
# and tag_runners_fast (or the configs in $CONFIGS), each with kept checkpoints, then for
# each: the 2x2 evaluation against random play (100 games per pairing, sampled actions),
# the same at every kept checkpoint with the curves' plot, and a GIF of one game.
#   bash scripts/gpu_tag_speed_ratios.sh OUT_DIR
# TOTAL_STEPS (default: each config's), CHECKPOINT_INTERVAL (iterations, default 25) and
# TRAIN_TIMEOUT (seconds per config, default 840) bound each run (EXTRA_TRAIN_ARGS: more
# `gpu-vecenv train` options, e.g. "--num-envs 2 --device cpu" for a smoke run); everything lands in
# OUT_DIR/<config>/ and OUT_DIR/summary.txt.
out="${1:-tag_speed_ratios}"
mkdir -p "$out"
configs="${CONFIGS:-tag_taggers_fast tag_same_speed tag_runners_fast}"
for name in $configs; do
  dir="$out/$name"; run="/tmp/runs/$name"
  mkdir -p "$dir"; rm -rf "$run"
  steps=(); [ -n "${TOTAL_STEPS:-}" ] && steps=(--total-steps "$TOTAL_STEPS")
  echo "== train: $name" | tee -a "$out/summary.txt"
  start=$(date +%s.%N)
  timeout "${TRAIN_TIMEOUT:-840}" gpu-vecenv train "$name" --run-dir "$run" --no-progress \
    "${steps[@]}" ${EXTRA_TRAIN_ARGS:-} --set trainer.eval_episodes=0 --set trainer.keep_checkpoints=true \
    --set trainer.checkpoint_interval="${CHECKPOINT_INTERVAL:-25}" 2>&1 | tail -4 \
    | tee -a "$out/summary.txt"
  echo "wall from start to exit: $(echo "$(date +%s.%N) - $start" | bc) s" \
    | tee -a "$out/summary.txt"
  cp "$run/metrics.jsonl" "$run/config.yaml" "$dir/" 2>/dev/null
  echo "== eval: $name, 2x2 against random play" | tee -a "$out/summary.txt"
  timeout 300 gpu-vecenv eval "$run" --vs-random --stochastic --seed 0 \
    --json "$dir/vs_random.json" 2>&1 | tee -a "$out/summary.txt"
  timeout 300 gpu-vecenv eval "$run" --vs-random --seed 0 \
    --json "$dir/vs_random_most_likely.json" 2>&1 | tail -6 | tee -a "$out/summary.txt"
  timeout 600 python3 scripts/tag_versus_random_curve.py "$run" "$dir/curve.json" \
    --plot "$dir/curve.png" --stochastic 2>&1 | tail -3
  timeout 300 gpu-vecenv eval "$run" --episodes 1 --stochastic --seed 0 \
    --gif "$dir/$name.gif" 2>&1 | tail -2
done
