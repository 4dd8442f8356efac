#!/bin/bash
# Source on the GPU machine to make it look like a pip user's: torch's CUDA build and the
# NVIDIA driver, nothing else. `hide_toolkit` renames nvcc away, unsets CUDA_HOME and
# uninstalls PyCUDA, then checks that kernels compile with NVRTC from torch's own wheels;
# `restore_toolkit` undoes it (PyCUDA from the device kit's wheels). Sourcing hides.
# It changes the machine (the device machine is thrown away after the session).
#   source scripts/lab/gpu_hide_toolkit.sh
hide_toolkit() {
  local f
  for f in $(type -ap nvcc) /usr/local/cuda*/bin/nvcc; do
    [ -e "$f" ] && mv "$f" "$f.hidden"
  done
  hash -r
  export GV_SAVED_CUDA_HOME="${CUDA_HOME-}"
  unset CUDA_HOME CUDA_PATH
  python3 -m pip uninstall -y -q pycuda 2>/dev/null
  python3 - <<'PY'
import importlib.util, shutil
from gpu_vecenv.backends.compiler import choose_compiler, find_nvcc
assert importlib.util.find_spec("pycuda") is None, "PyCUDA is still installed"
assert find_nvcc() is None and shutil.which("nvcc") is None, "nvcc is still visible"
compiler = choose_compiler()
print(f"toolkit hidden: no nvcc, no PyCUDA; kernels compile with {compiler.describe()}")
assert compiler.kind == "nvrtc" and "site-packages" in compiler.location, compiler
PY
}
restore_toolkit() {
  local f
  for f in /usr/local/cuda*/bin/nvcc.hidden /usr/local/bin/nvcc.hidden /usr/bin/nvcc.hidden; do
    [ -e "$f" ] && mv "$f" "${f%.hidden}"
  done
  hash -r
  [ -n "${GV_SAVED_CUDA_HOME-}" ] && export CUDA_HOME="$GV_SAVED_CUDA_HOME"
  python3 -m pip install -q --no-index --no-deps .device-kit/wheels/pycuda-*.whl
}
hide_toolkit
