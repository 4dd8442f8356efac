#!/bin/bash
# Used by gpu_refactor_bench.sh (this tree against an earlier commit):
# run a benchmark in one side's tree and write its JSON and log under $out. The caller
# sets $out (the output folder), $here (the repository root) and $tree (the side's tree).
run() { (cd "$tree" && "$@"); }
classic() {  # side, sizes, suffix: CartPole and Pendulum on the kernels
  run python3 -m gpu_vecenv.bench --env GPUCartPole-v1 GPUPendulum-v1 --backend cuda \
    --sizes "$2" --repeats 3 --json "$out/bench_$1$3.json" > "$out/bench_$1$3.log" 2>&1 \
    || echo "bench $1$3 failed"
}
tag() {  # side, cases, suffix: the side's own scripts/bench_tag.py (it reads that side's
  # kernel headers)
  run python3 scripts/bench_tag.py --case "$2" --json "$out/bench_tag_$1$3.json" \
    > "$out/bench_tag_$1$3.log" 2>&1 || echo "bench_tag $1$3 failed"
}
