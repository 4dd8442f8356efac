#!/bin/bash
# Where the fused PPO update's time goes on CartPole (the README main job's 16 envs and the
# PureJaxRL comparison's 2,048 and 16,384): per-kernel times of an iteration
# (scripts/profile_train.py, eager) and Nsight Compute's view of ppo_update_tiles; plus the
# main job's timeline from process start and torch's import time.
#   source .device-kit/setup.sh; bash scripts/lab/gpu_fused_profile.sh
# Output: $OUT/fused_profile.tar.gz. SIZES (default "16 2048 16384"), NCU=0 skips ncu,
# TIMELINES (default 3) main-job timelines, EXTRA: more --set arguments for every run,
# BEFORE_TREE (e.g. .bench-b, carried): also profile each size as that tree trains it,
# first, for a before/after in one call.
d=/tmp/fused_profile; rm -rf "$d"; mkdir -p "$d"
trap 'tar czf "$OUT/fused_profile.tar.gz" -C /tmp fused_profile' EXIT
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv > "$d/gpu.txt"
python3 - > "$d/torch_pyc.txt" 2>&1 <<'PY'
import os, torch
p = os.path.dirname(torch.__file__)
c = os.path.join(p, "__pycache__")
print(p, "writable", os.access(p, os.W_OK), "pycache", os.path.isdir(c),
      len(os.listdir(c)) if os.path.isdir(c) else 0)
PY
for i in 1 2 3; do /usr/bin/time -f "import torch %e s" python3 -c "import torch" 2>> "$d/torch_import.txt"; done
python3 -X importtime -c "import torch" 2> "$d/importtime_torch.txt"
for i in $(seq 1 "${TIMELINES:-3}"); do
  timeout 120 python3 scripts/lab/time_main_job.py "$d/timeline_$i.json" --env GPUCartPole-v1 \
    --run-dir /tmp/main_t --overwrite --no-progress --seed "$i" $EXTRA > "$d/timeline_$i.log" 2>&1
done
for n in ${SIZES:-16 2048 16384}; do
  steps=16; [ "$n" = 16 ] && steps=32
  if [ -n "$BEFORE_TREE" ]; then
    (cd "$BEFORE_TREE" && PYTHONPATH="$PWD" timeout 200 python3 scripts/profile_train.py \
      cartpole_ppo "$d/before_prof_$n.json" --set trainer.num_envs=$n --set ppo.num_steps=$steps \
      --iterations 10 $EXTRA > "$d/before_prof_$n.log" 2>&1)
  fi
  timeout 200 python3 scripts/profile_train.py cartpole_ppo "$d/prof_$n.json" \
    --set trainer.num_envs=$n --set ppo.num_steps=$steps --iterations 10 $EXTRA > "$d/prof_$n.log" 2>&1
  if [ "${NCU:-1}" = 1 ] && command -v ncu > /dev/null; then
    timeout 200 ncu --kernel-name regex:'ppo_update_tiles|ppo_reduce_grads' --launch-skip 200 \
      --launch-count 2 --set full --csv --page details \
      python3 scripts/profile_train.py cartpole_ppo "$d/ncu_prof_$n.json" --set trainer.num_envs=$n \
      --set ppo.num_steps=$steps --iterations 2 --warmup 4 $EXTRA > "$d/ncu_$n.csv" 2> "$d/ncu_$n.err"
  fi
done
