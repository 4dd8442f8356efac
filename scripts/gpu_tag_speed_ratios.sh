#!/bin/bash
# Tag at WarpDrive's three speed ratios: trains tag_taggers_fast, tag_same_speed and
# tag_runners_fast (or the configs in $CONFIGS), each on one GPU with kept checkpoints,
# then for each: the 2x2 evaluation against random play (100 games per pairing, sampled
# and most likely actions), the same at every kept checkpoint with the curves' plot, and a
# GIF of one game.
#   bash scripts/gpu_tag_speed_ratios.sh OUT_DIR
#   GPUS="1 2 3" bash scripts/gpu_tag_speed_ratios.sh OUT_DIR   # config i on GPU i, at once
# Without GPUS the configs run one after another on the default GPU. TOTAL_STEPS (default:
# each config's), CHECKPOINT_INTERVAL (iterations, default 100) and TRAIN_TIMEOUT (seconds
# of training per config, default 840: `timeout` then sends SIGTERM, which saves a
# checkpoint and ends the run) bound each run; EXTRA_TRAIN_ARGS: more `gpu-vecenv train`
# options, e.g. "--num-envs 2 --device cpu" for a smoke run; RUN_ROOT: where the run
# directories go (default /tmp/runs, one per config). Everything lands in
# OUT_DIR/<config>/ (its log in OUT_DIR/<config>/summary.txt) and OUT_DIR/summary.txt.
out="${1:-tag_speed_ratios}"
mkdir -p "$out"
configs=(${CONFIGS:-tag_taggers_fast tag_same_speed tag_runners_fast})
gpus=(${GPUS:-})

one_config() {  # $1 = config name; logs to $out/$1/summary.txt
  local name="$1" dir="$out/$1" run="${RUN_ROOT:-/tmp/runs}/$1"
  mkdir -p "$dir"; rm -rf "$run"
  local log="$dir/summary.txt" steps=()
  [ -n "${TOTAL_STEPS:-}" ] && steps=(--total-steps "$TOTAL_STEPS")
  echo "== train: $name on $(nvidia-smi -L 2>/dev/null | sed -n "$(( ${CUDA_VISIBLE_DEVICES:-0} + 1 ))p" | cut -c1-40)" | tee -a "$log"
  local start; start=$(date +%s.%N)
  timeout "${TRAIN_TIMEOUT:-840}" gpu-vecenv train "$name" --run-dir "$run" --no-progress \
    "${steps[@]}" ${EXTRA_TRAIN_ARGS:-} --set trainer.eval_episodes=0 --set trainer.keep_checkpoints=true \
    --set trainer.checkpoint_interval="${CHECKPOINT_INTERVAL:-100}" > "$dir/train.log" 2>&1
  echo "train exit status $?" | tee -a "$log"
  tail -4 "$dir/train.log" | tee -a "$log"
  echo "wall from start to exit: $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s" \
    | tee -a "$log"
  cp "$run/metrics.jsonl" "$run/config.yaml" "$dir/" 2>/dev/null
  echo "== eval: $name, 2x2 against random play" | tee -a "$log"
  timeout 300 gpu-vecenv eval "$run" --vs-random --stochastic --seed 0 \
    --json "$dir/vs_random.json" 2>&1 | tee -a "$log"
  timeout 300 gpu-vecenv eval "$run" --vs-random --seed 0 \
    --json "$dir/vs_random_most_likely.json" 2>&1 | tail -6 | tee -a "$log"
  timeout 600 python3 scripts/tag_versus_random_curve.py "$run" "$dir/curve.json" \
    --plot "$dir/curve.png" --stochastic > "$dir/curve.log" 2>&1
  tail -3 "$dir/curve.log" | tee -a "$log"
  timeout 300 gpu-vecenv eval "$run" --episodes 1 --stochastic --seed 0 \
    --gif "$dir/$name.gif" 2>&1 | tail -2 | tee -a "$log"
}

if [ ${#gpus[@]} -gt 0 ]; then
  [ ${#gpus[@]} -ge ${#configs[@]} ] || { echo "GPUS names fewer GPUs than configs"; exit 2; }
  for i in "${!configs[@]}"; do
    CUDA_VISIBLE_DEVICES="${gpus[$i]}" one_config "${configs[$i]}" > /dev/null &
  done
  wait
else
  for name in "${configs[@]}"; do one_config "$name"; done
fi
for name in "${configs[@]}"; do cat "$out/$name/summary.txt"; done > "$out/summary.txt"
echo "done" >> "$out/summary.txt"
