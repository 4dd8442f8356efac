"""Compiling ``cuda_src/<env>.cu`` to a cubin with nvcc, cached in the user's cache dir.

A kernel file is compiled once per (sources, headers, flags, nvcc version, GPU arch):
the cubin lands in ``$GPU_VECENV_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpu_vecenv``, else
``~/.cache/gpu_vecenv`` — never inside the installed package — under a name that hashes
all of those, so editing a header or upgrading nvcc recompiles and nothing else does.
Sizes (``num_envs``) are kernel arguments, so one cubin serves every size.

Nothing here imports PyCUDA; :func:`load_module` does, lazily, when a kernel is loaded.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def _cuda_src() -> Path:
    import gpu_vecenv.cuda_src

    return Path(gpu_vecenv.cuda_src.__file__).resolve().parent


CUDA_SRC = _cuda_src()
"""The kernel sources, as installed (the package ``gpu_vecenv.cuda_src``)."""

NVCC_FLAGS = ("-O3", "-std=c++17", "-fmad=false", "-Xptxas=-O3")
"""Flags of every kernel build. ``-fmad=false``: a float multiply and add never fuse, so each
operation rounds like torch's separate elementwise kernels (bit-identical results)."""


class CudaCompileError(RuntimeError):
    """nvcc rejected a kernel file; the message holds the file and nvcc's output."""


def find_nvcc() -> str | None:
    """Path of nvcc: ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, PATH, then /usr/local/cuda."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and os.path.isfile(os.path.join(root, "bin", "nvcc")):
            return os.path.join(root, "bin", "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    default = "/usr/local/cuda/bin/nvcc"
    return default if os.path.isfile(default) else None


def cache_dir() -> Path:
    """Where compiled kernels are kept (created on first use)."""
    explicit = os.environ.get("GPU_VECENV_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpu_vecenv"


@functools.lru_cache(maxsize=4)
def nvcc_version(nvcc: str) -> str:
    """The full ``nvcc --version`` text (part of the cache key)."""
    result = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise CudaCompileError(f"{nvcc} --version failed: {result.stderr.strip()}")
    return result.stdout


def source_path(name: str, path: str | os.PathLike | None = None) -> Path:
    """``cuda_src/<name>.cu``, or ``path`` (a kernel file of your own, e.g. a custom env's);
    a clear error if there is no such file."""
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no kernel file {path}")
        return path
    path = CUDA_SRC / f"{name}.cu"
    if not path.is_file():
        available = sorted(p.stem for p in CUDA_SRC.glob("*.cu"))
        raise FileNotFoundError(f"no kernel file {path}; available: {available}")
    return path


def _headers() -> list[Path]:
    return sorted((CUDA_SRC / "common").glob("*.cuh"))


def arch_flag(capability: tuple[int, int]) -> str:
    """``-arch=sm_XY`` for a device of compute capability ``(X, Y)``."""
    return f"-arch=sm_{capability[0]}{capability[1]}"


def build_command(
    nvcc: str, source: Path, output: Path, capability: tuple[int, int],
    extra_flags: tuple[str, ...] = (),
) -> list[str]:
    """The nvcc command line that compiles ``source`` to a cubin at ``output``."""
    return [nvcc, "-cubin", arch_flag(capability), *NVCC_FLAGS, *extra_flags,
            "-I", str(CUDA_SRC), "-o", str(output), str(source)]


def cache_key(name: str, capability: tuple[int, int], nvcc: str,
              extra_flags: tuple[str, ...] = (),
              path: str | os.PathLike | None = None) -> str:
    """Hash of the source, every common header, the flags, nvcc's version and the arch."""
    digest = hashlib.sha256()
    for file in (source_path(name, path), *_headers()):
        digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
    digest.update(" ".join((arch_flag(capability), *NVCC_FLAGS, *extra_flags)).encode())
    digest.update(nvcc_version(nvcc).encode())
    return digest.hexdigest()[:24]


def compile_cubin(
    name: str, capability: tuple[int, int], extra_flags: tuple[str, ...] = (),
    nvcc: str | None = None, path: str | os.PathLike | None = None,
) -> Path:
    """Path of the cubin of ``cuda_src/<name>.cu`` for ``sm_XY``, compiling it if needed.

    Raises:
        RuntimeError: nvcc is not found.
        CudaCompileError: nvcc failed; the message names the file and holds nvcc's output.
    """
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise RuntimeError("nvcc (the CUDA compiler) is not on PATH and CUDA_HOME is not set")
    source = source_path(name, path)
    key = cache_key(name, capability, nvcc, extra_flags, path)
    target = cache_dir() / f"{name}-sm_{capability[0]}{capability[1]}-{key}.cubin"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Compile next to the target and rename: concurrent processes never see half a file.
    fd, tmp = tempfile.mkstemp(suffix=".cubin", dir=target.parent)
    os.close(fd)
    try:
        command = build_command(nvcc, source, Path(tmp), capability, extra_flags)
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            output = (result.stderr + result.stdout).strip()
            raise CudaCompileError(
                f"nvcc failed to compile {source} (exit {result.returncode}):\n{output}\n"
                f"command: {' '.join(command)}"
            )
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


_ModuleKey = tuple[str, int, "str | None", tuple[str, ...]]
_modules: dict[_ModuleKey, object] = {}
_cubins: dict[_ModuleKey, Path] = {}


def load_module(name: str, device_index: int, path: str | os.PathLike | None = None,
                extra_flags: tuple[str, ...] = ()):
    """The PyCUDA module of ``cuda_src/<name>.cu`` loaded into torch's primary context of
    CUDA device ``device_index`` (compiled for that device's arch with ``extra_flags``,
    e.g. ``-D`` sizes; loaded once per process and flag set).

    PyCUDA is imported here, not earlier. Its context is the device's *primary* context,
    the one PyTorch's runtime uses, retained (never created); it is pushed only while the
    module loads, then popped, so PyCUDA leaves the thread's context stack as it found it.
    """
    key = (name, device_index, None if path is None else str(path), tuple(extra_flags))
    module = _modules.get(key)
    if module is not None:
        return module
    import pycuda.driver as cuda
    import torch

    capability = torch.cuda.get_device_capability(device_index)
    cubin = compile_cubin(name, capability, tuple(extra_flags), path=path)
    _cubins[key] = cubin
    torch.cuda.init()  # torch's runtime makes the primary context current on this thread
    cuda.init()
    context = _primary_context(device_index)
    context.push()
    try:
        module = cuda.module_from_buffer(cubin.read_bytes())
    finally:
        cuda.Context.pop()
    _modules[key] = module
    return module


_driver_modules: dict[_ModuleKey, object] = {}


def load_driver_module(name: str, device_index: int, path: str | os.PathLike | None = None,
                       extra_flags: tuple[str, ...] = ()):
    """The same cubin as :func:`load_module`, loaded through the driver API (ctypes) into
    the same primary context: its functions can be launched on any stream, torch's side
    streams and CUDA-graph capture included (see :mod:`gpu_vecenv.backends.launch`)."""
    key = (name, device_index, None if path is None else str(path), tuple(extra_flags))
    module = _driver_modules.get(key)
    if module is not None:
        return module
    import pycuda.driver as cuda

    from gpu_vecenv.backends.launch import DriverModule

    load_module(name, device_index, path, extra_flags)  # compiles if needed
    cubin = _cubins[key]
    context = _primary_context(device_index)
    context.push()
    try:
        module = DriverModule(cubin.read_bytes())
    finally:
        cuda.Context.pop()
    _driver_modules[key] = module
    return module


_contexts: dict[int, object] = {}


def _primary_context(device_index: int):
    """PyCUDA's handle on the primary context of ``device_index`` (retained once)."""
    context = _contexts.get(device_index)
    if context is None:
        import pycuda.driver as cuda

        context = cuda.Device(device_index).retain_primary_context()
        _contexts[device_index] = context
    return context
