#!/bin/bash
# This tree against an earlier commit, same toolchain, one call on one GPU: what a change
# that should not move any figure (a refactor) did to them.
# - before: a `git archive` of the earlier commit in .bench-before/ (carried); after: this
#   tree. Each side runs from its own tree (PYTHONPATH) and kernel cache.
# - GPU-bound points (CartPole/Pendulum at 1M-4M envs, Tag's large cases) once per side;
#   host-bound points (1-16,384 envs, Tag's small cases) and the PPO trainer
#   (TRAIN_ITERATIONS, default 1000) in ROUNDS alternating rounds (host timings on this VM
#   drift by tens of percent between runs);
#   then a side-by-side table of medians (scripts/lab/compare_paths.py).
#   git archive --prefix=.bench-before/ REV | tar x      # here, then carry .bench-before
#   bash scripts/lab/gpu_refactor_bench.sh OUT_DIR            # there (ROUNDS=2, STAGES="large small")
# BEFORE_TREE names another earlier tree (default .bench-before), e.g. to bisect a change in
# one call: for t in .bench-a .bench-b; do BEFORE_TREE=$t STAGES=train bash ... OUT_$t; done
out="$(realpath -m "${1:-gpu_refactor_bench}")"
mkdir -p "$out"
here="$PWD"
use() {  # $1 = before | after: the side's tree first on sys.path (the installed package,
  # which other processes on the machine may be using, stays as it is)
  if [ "$1" = before ]; then tree="${BEFORE_TREE:-.bench-before}"; else tree=.; fi
  [ "$tree" = . ] || link_earlier_tree "$tree"
  export PYTHONPATH="$here/$tree"
  echo "$1: $(cd "$tree" && python3 -c 'import gpu_vecenv.backends.compiler as c, gpu_vecenv.envs.tag as t; print(c.CUDA_SRC, t.__file__)')"
  export GPU_VECENV_CACHE_DIR=/tmp/gv_cache_$1
}
source "$here/scripts/lab/bench_sides.sh"  # run, classic, tag
source "$here/scripts/lab/earlier_tree.sh"  # link_earlier_tree
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader
stages="${STAGES:-large small}"  # "train": only the PPO trainer's rounds
points="${POINTS:-classic tag}"    # the env benchmarks of the large and small stages
for side in before after; do
  [[ $stages == *large* ]] || break
  use $side
  echo "== $side"
  [[ $points == *classic* ]] && classic $side 1048576,4194304 _large
  [[ $points == *tag* ]] && tag $side "tag 2000x105,tag 200x1000,tag 1x16384" _large
done
for round in $(seq "${ROUNDS:-2}"); do
  [[ $stages == *small* || $stages == *train* ]] || break
  for side in before after; do
    use $side
    if [[ $stages == *small* ]]; then
      [[ $points == *classic* ]] && classic $side 1,1024,16384 "_r$round"
      [[ $points == *tag* ]] && tag $side "tag 1x5,tag 2000x5,grid 1x5,grid 2000x5" "_r$round"
    fi
    # the PPO trainer in every round too: 100 iterations (0.2-0.5 s timed) moved by 25 % between
    # single runs, so longer windows, several rounds, medians
    run timeout 300 python3 scripts/bench_train.py "$out/bench_train_${side}_r$round.json" \
      --graphs true --modes throughput --iterations "${TRAIN_ITERATIONS:-1000}" \
      > "$out/bench_train_${side}_r$round.log" 2>&1 || echo "bench_train $side r$round failed"
  done
done
use after
python3 scripts/lab/compare_paths.py "$out" before after
tar czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"  # every JSON, as one file
