#!/bin/bash
# Sourced by gpu_refactor_bench.sh and gpu_h200_session.sh: an earlier commit's tree (a
# `git archive`, e.g. .bench-before) run from PYTHONPATH. The installed layout maps
# gpu_vecenv.cuda_src, .envs and .adapters to cuda_src/, envs/ and adapters/; links give the
# tree the same (else the installed tree's kernels and env modules would be found).
link_earlier_tree() {  # TREE
  local sub
  for sub in cuda_src envs adapters; do
    [ -e "$1/gpu_vecenv/$sub" ] || ln -s "../$sub" "$1/gpu_vecenv/$sub"
  done
}
