#!/bin/bash
# Source on the GPU machine to make it look like a pip user's: torch's CUDA build, the
# NVIDIA driver, and nothing else — nvcc hidden (renamed), CUDA_HOME unset, PyCUDA
# uninstalled. Then checks that the kernels' compiler is NVRTC from torch's own wheels.
# It changes the machine (the device machine is thrown away after the session).
#   source scripts/gpu_hide_toolkit.sh
for f in $(type -ap nvcc) /usr/local/cuda*/bin/nvcc; do
  [ -e "$f" ] && mv "$f" "$f.hidden"
done
hash -r
unset CUDA_HOME CUDA_PATH
python3 -m pip uninstall -y -q pycuda 2>/dev/null
python3 - <<'PY' || return 1 2>/dev/null || exit 1
import importlib.util, shutil
from gpu_vecenv.backends.compiler import choose_compiler, find_nvcc
assert importlib.util.find_spec("pycuda") is None, "PyCUDA is still installed"
assert find_nvcc() is None and shutil.which("nvcc") is None, "nvcc is still visible"
compiler = choose_compiler()
print(f"toolkit hidden: no nvcc, no PyCUDA; kernels compile with {compiler.describe()}")
assert compiler.kind == "nvrtc" and "site-packages" in compiler.location, compiler
PY
