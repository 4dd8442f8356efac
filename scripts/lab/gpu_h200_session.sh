#!/bin/bash
# One lease of one H200 in calls that each end inside the 10-minute limit (the machine stays
# warm between them; /tmp is kept):
#   train:  the training-speed figures: where a Tag PPO iteration's time goes
#           (scripts/profile_train.py, float32 and TF32 products), the README's main
#           job from process start (cold and warm kernel cache), WarpDrive's own trainer
#           beside ours (scripts/bench_vs_warpdrive_trainer.py). PROFILE_CONFIGS,
#           PROFILE_VARIANTS (e.g. "highest high high,compile"), MAIN_RUNS and WARPDRIVE=0
#           choose the parts (an empty MAIN_RUNS or PROFILE_CONFIGS: none);
#           PROFILE_BEFORE_TREE (e.g. .bench-before, carried) profiles each config first as
#           that earlier tree trains it, for a before/after in one call; WD_ARGS: more
#           arguments of the WarpDrive comparison (e.g. "--set trainer.matmul_precision=high")
#   purejaxrl: PPO CartPole against PureJaxRL (scripts/bench_vs_purejaxrl.py)
#   mainjob: the README's main job with other num_envs / learning rates and seeds
#           (MAIN_CANDIDATES="16:0.00025 32:0.001", MAIN_SEEDS="1 2 3 4 5")
#   mainab: the main job as BEFORE_TREE (default .bench-b) ships it and as this tree, alternating
#           (STARTUP_RUNS rounds), then TIMELINES (default 3) in-process timelines
#   pyc:    the main job as the machine runs Python (no bytecode written) and with a bytecode
#           cache as a pip install leaves one, alternating (STARTUP_RUNS rounds)
#   startup: the main job with its CUDA warm-up thread, then its fast exit, switched off in
#           turn, alternating (STARTUP_RUNS rounds, default 10), and each variant's median
#   curves: whether TF32 products train as well: CONFIG (default tag_same_speed) trained
#           TOTAL_STEPS (default 1e9) in each of CURVE_VARIANTS (default "highest high";
#           as PROFILE_VARIANTS)
#           (scripts/gpu_tag_speed_ratios.sh: 2x2 against random play, curves, GIF each)
#   checks: the GPU suite (gpu_tests.sh, SANITIZE=0 leaves the sanitizers out; TESTS=0
#           skips it; GPU_TESTS="tests/... -k ..." runs those) and this tree against
#           .bench-before (gpu_refactor_bench.sh; default STAGES=train: the PPO trainer in
#           alternating rounds; POINTS picks the env benchmarks)
#   source .device-kit/setup.sh; bash scripts/lab/gpu_h200_session.sh STAGE
# One stage per call: each bounds its last step by CALL_S (default 585) seconds from its own
# start.
# Logs and JSON go to /tmp/h200/STAGE (kept while the machine is warm), packed into
# $OUT/STAGE.tar.gz at the end of the stage.
stage="$1"
work=/tmp/h200
d="$work/$stage"
mkdir -p "$d"
pack() { tar czf "$OUT/$stage.tar.gz" -C "$work" "$stage"; }
trap pack EXIT
export PYTHONUNBUFFERED=1
source scripts/lab/earlier_tree.sh  # link_earlier_tree
left() { echo $(( ${CALL_S:-$1} - SECONDS )); }  # seconds left of the call (CALL_S or $1)
now() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
# the gpu-vecenv command (as an array): installed, or with MAIN_TREE set that earlier tree's
# (run inside it: from the repo root, the installed package would be imported first)
cli_command() {
  cli=(gpu-vecenv)
  [ -n "${MAIN_TREE:-}" ] && cli=(env -C "$MAIN_TREE" PYTHONPATH="$PWD/$MAIN_TREE" python3 -c
    'from gpu_vecenv.cli import console_main; console_main()')
}
# the README's main job as LABEL with more train arguments: its log in $d/main_job_LABEL.log,
# one line of its wall time from before the process starts (also appended to $d/walls.txt);
# MAIN_TREE: as cli_command
main_job() {
  local label="$1"; shift
  local t0 t1 rc cli
  cli_command
  t0=$(now)
  timeout 120 "${cli[@]}" train --env GPUCartPole-v1 --run-dir "$work/main_$label" \
    --overwrite "$@" > "$d/main_job_$label.log" 2>&1
  rc=$?; t1=$(now)
  echo "$label exit $rc wall $(python3 -c "print(round($t1 - $t0, 2))") s" | tee -a "$d/walls.txt"
}
# each variant's median wall in $d/walls.txt (labels VARIANT_ROUND)
medians() {
  python3 - "$d/walls.txt" <<'PY'
import collections, statistics, sys
walls = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, _, _, _, wall, _ = line.split()
    walls[label.rsplit("_", 1)[0]].append(float(wall))
for variant, values in walls.items():
    print(f"{variant}: median {statistics.median(values):.2f} s over {len(values)}: {values}")
PY
}
# the train arguments of a variant: "PRECISION[,compile]" (trainer.matmul_precision, and
# trainer.compile_update=true with ",compile")
variant_args() {
  echo "--set trainer.matmul_precision=${1%%,*}"
  if [[ $1 == *compile* ]]; then echo "--set trainer.compile_update=true"; fi
}
peers() {  # the peers kit, plus flax/optax/... from .whl where the machine lacks them
  source .device-kit/peers/setup.sh
  for mod in flax optax chex msgpack treescope absl toolz; do
    python3 -c "import $mod" 2>/dev/null && continue
    wheel=$(ls .whl/"${mod/absl/absl_py}"-*.whl 2>/dev/null | head -1)
    [ -n "$wheel" ] && python3 -m pip install -q --no-index --no-deps --no-compile \
      --no-cache-dir --target "$PEERS_PATH" "$wheel" && echo "installed $wheel"
  done
}

case "$stage" in
train)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader
  echo "== README main job, cold kernel cache, then warm (wall from before the process starts)"
  runs="${MAIN_RUNS-cold warm1 warm2}"
  [[ $runs == *cold* ]] || gpu-vecenv compile -j 16 | tail -1  # the cache the warm runs read
  for run in $runs; do  # MAIN_RUNS="": none
    [ "$run" = cold ] && export GPU_VECENV_CACHE_DIR=$work/cold_cache || unset GPU_VECENV_CACHE_DIR
    main_job "$run"
    grep -iE "solved|evaluation|stop_check" "$d/main_job_$run.log" | cut -c1-200 | tail -3
    [ "$run" = cold ] && gpu-vecenv compile -j 16 | tail -1
  done
  unset GPU_VECENV_CACHE_DIR
  if [ -n "${MAIN_RUNS-x}" ]; then
    echo "== the main job's timeline (warm cache)"
    timeout 120 python3 scripts/lab/time_main_job.py "$d/main_job_timeline.json" \
      --env GPUCartPole-v1 --run-dir "$work/main_timed" --overwrite --no-progress 2>&1 | tail -12
  fi
  echo "== profiles ($SECONDS s)"
  # ours_a2c / ours_ppo in PROFILE_CONFIGS: our trainers of the WarpDrive comparison
  python3 scripts/bench_vs_warpdrive_trainer.py unused --write-configs "$work/wd_configs" >/dev/null
  for name in ${PROFILE_CONFIGS-tag_ppo tag_same_speed}; do  # PROFILE_CONFIGS="": none
    config="$name"
    [ -f "$work/wd_configs/$name.yaml" ] && config="$work/wd_configs/$name.yaml"
    if [ -n "${PROFILE_BEFORE_TREE:-}" ]; then  # e.g. .bench-before: that commit's trainer and
      # config as it shipped them, first
      link_earlier_tree "$PROFILE_BEFORE_TREE"
      PYTHONPATH="$PWD/$PROFILE_BEFORE_TREE" GPU_VECENV_CACHE_DIR=$work/cache_before \
        timeout 150 python3 scripts/profile_train.py "$config" "$d/profile_${name}_before.json" \
        > "$d/profile_${name}_before.log" 2>&1
      echo "${name}_before exit $? ($SECONDS s)"
      grep -E "steps/s|matrix products" "$d/profile_${name}_before.log" | cut -c1-200
    fi
    for variant in ${PROFILE_VARIANTS:-highest high}; do
      label="${name}_${variant/,/_}"
      # shellcheck disable=SC2046  # the variant's arguments, one word each
      timeout 150 python3 scripts/profile_train.py "$config" "$d/profile_$label.json" \
        $(variant_args "$variant") > "$d/profile_$label.log" 2>&1
      echo "$label exit $? ($SECONDS s)"
      grep -E "steps/s|matrix products" "$d/profile_$label.log" | cut -c1-200
    done
  done
  [ "${WARPDRIVE:-1}" = 0 ] && exit 0
  echo "== WarpDrive's trainer beside ours ($SECONDS s)"
  peers
  PYTHONPATH=$PEERS_PATH timeout "$(left 585)" python3 scripts/bench_vs_warpdrive_trainer.py \
    "$d/vs_warpdrive_trainer.json" --seconds "${WD_SECONDS:-60}" ${WD_ARGS:-} \
    > "$d/vs_warpdrive_trainer.log" 2>&1
  echo "exit $? ($SECONDS s)"; tail -25 "$d/vs_warpdrive_trainer.log" | cut -c1-220
  ;;
mainjob)
  # the README's main job with other envs / learning rates (MAIN_CANDIDATES, "envs:lr ...")
  # and seeds (MAIN_SEEDS), warm kernel cache: wall from before the process starts, the step
  # it stopped at and the evaluation it reports
  gpu-vecenv compile -j 16 | tail -1
  for cand in ${MAIN_CANDIDATES:-16:0.00025 32:0.001 16:0.001}; do
    for seed in ${MAIN_SEEDS:-1 2 3 4 5}; do
      label="${cand/:/_}_$seed"  # envs_lr_seed
      echo "$(main_job "$label" --no-progress --num-envs "${cand%%:*}" --seed "$seed" \
        --set ppo.learning_rate="${cand##*:}");" \
        "$(grep -o "at step [0-9,]*" "$d/main_job_$label.log" | head -1);" \
        "$(grep -o "mean return [0-9.]*" "$d/main_job_$label.log" | tail -1)"
      [ "$(left 585)" -gt 20 ] || break 2
    done
  done
  ;;
mainab)
  # the README's main job as BEFORE_TREE (default .bench-b, carried) ships it and as this tree,
  # alternating, STARTUP_RUNS rounds (seed = round), warm kernel caches; then each side's
  # median, and TIMELINES in-process timelines of this tree (scripts/lab/time_main_job.py)
  before="${BEFORE_TREE:-.bench-b}"
  link_earlier_tree "$before"
  gpu-vecenv compile -j 16 | tail -1
  MAIN_TREE="$before" cli_command
  "${cli[@]}" compile -j 16 | tail -1
  for round in $(seq "${STARTUP_RUNS:-10}"); do
    MAIN_TREE="$before" main_job "before_$round" --no-progress --seed "$round" > /dev/null
    main_job "after_$round" --no-progress --seed "$round" > /dev/null
    [ "$(left 585)" -gt 25 ] || break
  done
  medians
  for i in $(seq "${TIMELINES:-3}"); do
    [ "$(left 585)" -gt 30 ] || break
    timeout 60 python3 scripts/lab/time_main_job.py "$d/main_job_timeline_$i.json" \
      --env GPUCartPole-v1 --run-dir "$work/main_timed" --overwrite --no-progress --seed "$i" \
      2>&1 | tail -14
  done
  ;;
pyc)
  # the README main job as this machine runs Python (PYTHONDONTWRITEBYTECODE set: every
  # process compiles torch's sources again) and with a bytecode cache, as a pip install
  # leaves one (PYTHONPYCACHEPREFIX, written by one untimed run first), alternating,
  # STARTUP_RUNS rounds (seed = round); `import torch` alone three times each way; medians
  cache="$work/pycache"
  with_cache() { (unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX="$cache"; "$@"); }
  echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}"
  gpu-vecenv compile -j 16 | tail -1
  with_cache main_job pyc_warmup --no-progress --seed 99 > /dev/null
  sed -i '/^pyc_warmup /d' "$d/walls.txt"
  for i in 1 2 3; do
    /usr/bin/time -f "import torch, as is: %e s" python3 -c "import torch" 2>> "$d/import.txt"
    with_cache /usr/bin/time -f "import torch, bytecode cache: %e s" python3 -c "import torch" \
      2>> "$d/import.txt"
  done
  cat "$d/import.txt"
  for round in $(seq "${STARTUP_RUNS:-10}"); do
    main_job "asis_$round" --no-progress --seed "$round" > /dev/null
    with_cache main_job "pyc_$round" --no-progress --seed "$round" > /dev/null
    [ "$(left 585)" -gt 20 ] || break
  done
  for log in "$d"/main_job_pyc_*.log "$d"/main_job_asis_*.log; do  # where each stopped, its eval
    echo "$(basename "$log" .log): $(grep -o "at step [0-9,]*" "$log" | head -1);" \
      "$(grep -o "mean return [0-9.]* (std" "$log" | tail -1)"
  done
  medians
  ;;
startup)
  # the README main job with each of its start-up switches off in turn, alternating, STARTUP_RUNS
  # rounds (default 10; seed = round): both on, GPU_VECENV_CUDA_WARMUP=0, GPU_VECENV_FAST_EXIT=0;
  # walls in walls.txt, then each variant's median
  gpu-vecenv compile -j 16 | tail -1
  for round in $(seq "${STARTUP_RUNS:-10}"); do
    for variant in both nowarm nofast; do
      warm=1; fast=1
      [ "$variant" = nowarm ] && warm=0
      [ "$variant" = nofast ] && fast=0
      GPU_VECENV_CUDA_WARMUP=$warm GPU_VECENV_FAST_EXIT=$fast \
        main_job "${variant}_$round" --no-progress --seed "$round" > /dev/null
    done
    [ "$(left 585)" -gt 25 ] || break
  done
  medians
  ;;
purejaxrl)
  peers
  PYTHONPATH=$PEERS_PATH timeout "$(left 585)" python3 scripts/bench_vs_purejaxrl.py \
    "$d/vs_purejaxrl.json" --sizes "${SIZES:-2048,16384}" --repeats "${REPEATS:-5}" \
    > "$d/vs_purejaxrl.log" 2>&1
  echo "exit $? ($SECONDS s)"; tail -30 "$d/vs_purejaxrl.log" | cut -c1-220
  ;;
curves)
  for variant in ${CURVE_VARIANTS:-highest high}; do  # as PROFILE_VARIANTS
    label="${variant/,/_}"
    CONFIGS="${CONFIG:-tag_same_speed}" TOTAL_STEPS="${TOTAL_STEPS:-1000000000}" \
      RUN_ROOT="$work/runs_$label" TRAIN_TIMEOUT="${TRAIN_TIMEOUT:-200}" \
      EXTRA_TRAIN_ARGS="$(variant_args "$variant" | tr '\n' ' ')" \
      bash scripts/gpu_tag_speed_ratios.sh "$d/$label" > "$d/$label.log" 2>&1
    echo "$label exit $? ($SECONDS s)"
    grep -E "^done|agent-steps|wall from|tagged|tags|entropy" "$d/$label/summary.txt" \
      | head -12 | cut -c1-200
  done
  ;;
checks)
  echo "== GPU suite"
  [ "${TESTS:-1}" = 0 ] || WORKERS=16 TEST_TIMEOUT="${TEST_TIMEOUT:-400}" SANITIZE=0 bash scripts/lab/gpu_tests.sh "$work/gpu_tests"
  cp "$work/gpu_tests/gpu_tests.log" "$d/" 2>/dev/null
  if [ -n "${GPU_TESTS:-}" ]; then  # a few GPU tests by pytest arguments, e.g. "-k compiled"
    timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE $GPU_TESTS \
      > "$d/gpu_tests_selected.log" 2>&1
    echo "selected GPU tests exit $?: $(tail -1 "$d/gpu_tests_selected.log")"
  fi
  echo "== before/after, stages ${STAGES:-train} ($SECONDS s)"
  STAGES="${STAGES:-train}" ROUNDS="${ROUNDS:-5}" timeout "$(left 585)" \
    bash scripts/lab/gpu_refactor_bench.sh "$work/refactor"
  echo "exit $? ($SECONDS s)"
  # cut short, the bench packs nothing: keep its raw rounds and compare what there is
  cp -r "$work/refactor" "$d/" 2>/dev/null
  [ -f "$work/refactor.tar.gz" ] || python3 scripts/lab/compare_paths.py "$work/refactor" before after
  ;;
*)
  echo "usage: gpu_h200_session.sh train|mainjob|mainab|pyc|startup|purejaxrl|curves|checks"; exit 2
  ;;
esac
