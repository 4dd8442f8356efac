"""NVRTC, CUDA's runtime compiler, through ctypes: kernels compile with no toolkit.

pip's CUDA builds of torch depend on NVIDIA's ``nvidia-cuda-nvrtc`` wheel, so on a machine
that runs torch on a GPU, ``libnvrtc`` is already installed in site-packages
(``nvidia/cu13/lib/libnvrtc.so.13`` for CUDA 13, ``nvidia/cuda_nvrtc/lib/libnvrtc.so.12``
for CUDA 12). :func:`find_nvrtc` looks there first, then in a CUDA toolkit
(``$CUDA_HOME``, ``$CUDA_PATH``, ``/usr/local/cuda``), a conda environment, and the
loader's path; ``$GPU_VECENV_NVRTC`` names a library explicitly. Where several are found,
the one of torch's own CUDA major version wins: its cubins load on any driver that runs
torch.

We call the C library with ctypes (as for the driver, :mod:`gpu_vecenv.backends.driver`)
rather than through ``cuda-python``'s bindings: it is the same library and the same
compile time, with no extra dependency.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

_LIBRARY = re.compile(r"^libnvrtc\.so(\.\d+)*$")


class NvrtcError(RuntimeError):
    """NVRTC rejected a program; the message holds the file, NVRTC's version and its log."""


def _torch_cuda_major() -> int | None:
    try:
        import torch
    except ImportError:
        return None
    version = torch.version.cuda
    return int(version.split(".")[0]) if version else None


def _major_of(path: str) -> int | None:
    match = re.search(r"libnvrtc\.so\.(\d+)", os.path.basename(path))
    return int(match.group(1)) if match else None


def candidate_paths() -> list[str]:
    """Library files and names to try, best first (see the module docstring)."""
    explicit = os.environ.get("GPU_VECENV_NVRTC")
    wheels, toolkits = [], []
    for entry in sys.path:
        if os.path.isdir(os.path.join(entry, "nvidia")):
            for pattern in ("nvidia/cu*/lib/libnvrtc.so*", "nvidia/cuda_nvrtc/lib/libnvrtc.so*"):
                wheels += glob.glob(os.path.join(entry, pattern))
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda",
             os.environ.get("CONDA_PREFIX")]
    for root in filter(None, roots):
        for lib in ("lib64", "lib"):
            toolkits += glob.glob(os.path.join(root, lib, "libnvrtc.so*"))
    found = [p for p in dict.fromkeys(wheels + toolkits) if _LIBRARY.match(os.path.basename(p))]
    major = _torch_cuda_major()
    found.sort(key=lambda p: _major_of(p) != major)  # stable: torch's major first
    loader_names = [f"libnvrtc.so.{major}"] if major else []
    return ([explicit] if explicit else []) + found + loader_names + ["libnvrtc.so"]


def _load_builtins(directory: str) -> None:
    """NVRTC dlopens ``libnvrtc-builtins.so.X.Y`` by name, which fails when that file sits
    in a wheel's folder off the loader's path: load it first, so the name resolves."""
    for path in sorted(glob.glob(os.path.join(directory, "libnvrtc-builtins.so.*"))):
        if ".alt." not in path:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


@dataclass(frozen=True)
class Nvrtc:
    """A loaded NVRTC library."""

    library: ctypes.CDLL
    path: str
    version: tuple[int, int]
    archs: tuple[int, ...]
    """Compute capabilities it compiles cubins for, e.g. ``(75, 80, ..., 90, 100, ...)``."""

    @property
    def name(self) -> str:
        return f"NVRTC {self.version[0]}.{self.version[1]}"

    def compile(self, source: Path, options: list[str], ptx: bool = False) -> tuple[bytes, str]:
        """Compile ``source`` with ``options``; returns ``(cubin or PTX, NVRTC's log)``.

        Raises:
            NvrtcError: NVRTC rejected the program (the message holds its log).
        """
        lib = self.library
        program = ctypes.c_void_p()
        self._check(lib.nvrtcCreateProgram(ctypes.byref(program), source.read_bytes(),
                                           str(source).encode(), 0, None, None),
                    "nvrtcCreateProgram")
        try:
            encoded = [o.encode() for o in options]
            result = lib.nvrtcCompileProgram(program, len(encoded),
                                             (ctypes.c_char_p * len(encoded))(*encoded))
            size = ctypes.c_size_t()
            self._check(lib.nvrtcGetProgramLogSize(program, ctypes.byref(size)), "log size")
            log = ctypes.create_string_buffer(size.value)
            self._check(lib.nvrtcGetProgramLog(program, log), "nvrtcGetProgramLog")
            log_text = log.value.decode(errors="replace").strip()
            if result != 0:
                raise NvrtcError(f"{self.name} failed to compile {source} "
                                 f"({self._error_name(result)}):\n{log_text}\n"
                                 f"options: {' '.join(options)}")
            get_size, get = (("nvrtcGetPTXSize", "nvrtcGetPTX") if ptx
                             else ("nvrtcGetCUBINSize", "nvrtcGetCUBIN"))
            self._check(getattr(lib, get_size)(program, ctypes.byref(size)), get_size)
            image = ctypes.create_string_buffer(size.value)
            self._check(getattr(lib, get)(program, image), get)
            return image.raw, log_text
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(program))

    def _error_name(self, result: int) -> str:
        return self.library.nvrtcGetErrorString(result).decode()

    def _check(self, result: int, what: str) -> None:
        if result != 0:
            raise NvrtcError(f"{self.name}: {what} failed ({self._error_name(result)})")


def load(path: str) -> Nvrtc:
    """Open the NVRTC library at ``path`` (a file or a name for the loader).

    Raises:
        OSError: it cannot be loaded.
    """
    if os.path.sep in path:
        _load_builtins(os.path.dirname(path))
    lib = ctypes.CDLL(path)
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    count = ctypes.c_int()
    lib.nvrtcGetNumSupportedArchs(ctypes.byref(count))
    archs = (ctypes.c_int * count.value)()
    lib.nvrtcGetSupportedArchs(archs)
    return Nvrtc(lib, path, (major.value, minor.value), tuple(archs))


@functools.cache
def find_nvrtc() -> Nvrtc | None:
    """The NVRTC library to compile with (see the module docstring), or ``None``."""
    for path in candidate_paths():
        try:
            return load(path)
        except OSError:
            continue
    return None


def install_hint() -> str:
    """How to get NVRTC for the installed torch."""
    major = _torch_cuda_major()
    if major is None:
        return "install a CUDA build of torch (its pip wheels bring NVRTC)"
    package = "nvidia-cuda-nvrtc" if major >= 13 else f"nvidia-cuda-nvrtc-cu{major}"
    return (f"pip install '{package}=={major}.*' (torch is built with CUDA {major}), or set "
            "CUDA_HOME to a CUDA toolkit")
