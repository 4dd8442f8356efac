#!/bin/bash
# Differential check of cuda_src/tag.cu without a GPU: the working tree's kernel against
# the one at git ref $1 (default HEAD), both compiled for the host with shim.h (one
# std::thread per CUDA thread), over 180 scenarios: every autoreset mode, full and partial
# observations, staged or not, runners exiting or not, one launch per step, one launch per
# phase, several blocks per game. Every buffer must match byte for byte. Then the working
# tree's kernel with 1 to 3 scan helpers per agent ((helpers + 1) * A threads per block)
# against REF's without, over
# partial observations of odd and even A, K below kMax and K = A - 1, tied distances.
#   scripts/lab/tag_emulation/compare.sh [REF] [REF_TILE_BYTES (32 before the one-block step)]
set -e
here=$(cd "$(dirname "$0")/../../../tests/host_kernels/tag_emulation" && pwd)
root=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build() {  # tag.cu, output binary, extra flags
  sed 's/asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));/bytes = emu_smem_bytes;/' \
    "$1" > "$work/tag_emu.cu"
  grep -q emu_smem_bytes "$work/tag_emu.cu"
  g++ -std=c++20 -O1 -ffp-contract=off -pthread -I"$root/cuda_src" -I"$work" \
    -DTAG_ONLY -DTAG_ONLY_full -DTAG_ONLY_k4 -DTAG_ONLY_k10 $3 "$here/harness.cpp" -o "$2"
}
git -C "$root" show "${1:-HEAD}:cuda_src/tag.cu" > "$work/tag_ref.cu"
build "$work/tag_ref.cu" "$work/ref" "-DEMU_TILE_BYTES=${2:-36}"
build "$root/cuda_src/tag.cu" "$work/new" "-DEMU_SCAN_HELPERS -DTAG_ONLY_k4_helpers -DTAG_ONLY_k10_helpers"
fail=0; n=0
for mode in 0 1 2; do
for cfg in "3 11 3 0" "4 5 1 4" "2 40 4 5" "2 70 7 10" "1 33 2 0"; do
for staged in 0 1; do for exits in 1 0; do for phased in 0 1; do for cap in 256 32; do
  set -- $cfg
  [ $cap = 32 ] && [ $phased = 0 ] && continue
  args="$1 $2 $3 $4 $mode 10 $((n + 7)) $staged $exits 0.02 $phased $cap"
  "$work/ref" $args "$work/ref.bin" > /dev/null
  "$work/new" $args "$work/new.bin" > /dev/null
  n=$((n + 1))
  if ! cmp -s "$work/ref.bin" "$work/new.bin"; then echo "differs: $args"; fail=$((fail + 1)); fi
done; done; done; done; done; done
echo "$n scenarios, $fail differ"
h=0; hfail=0
for mode in 0 1 2; do
for cfg in "5 2 1 1" "4 5 1 4" "3 11 3 10" "3 33 2 7" "2 40 4 5" "3 64 6 3" "2 70 7 10" \
           "2 105 12 10" "2 128 8 8"; do
for staged in 0 1; do for ties in 0 1; do
  set -- $cfg
  exits=$((h % 2)); phased=$((h % 5 == 0 ? 1 : 0))  # a step of one launch per phase, at times
  helpers=$((h % 3 + 1)); [ $(((helpers + 1) * $2)) -gt 512 ] && helpers=1
  args="$1 $2 $3 $4 $mode 10 $((h + 101)) $staged $exits 0.02 $phased 512"
  "$work/ref" $args "$work/ref.bin" 0 $ties > /dev/null
  "$work/new" $args "$work/new.bin" $helpers $ties > /dev/null
  h=$((h + 1))
  if ! cmp -s "$work/ref.bin" "$work/new.bin"; then
    echo "differs (scan helpers: $helpers): $args"; hfail=$((hfail + 1))
  fi
done; done; done; done
echo "$h scenarios with scan helpers, $hfail differ"
[ $fail = 0 ] && [ $hfail = 0 ]
