"""Compiling kernel files for a GPU, cached in the user's cache dir, and loading them.

Two compilers, one result:

- **NVRTC** (default): CUDA's runtime compiler, a library that pip's CUDA builds of torch
  already install (:mod:`gpu_vecenv.backends.nvrtc`): no toolkit needed;
- **nvcc**: a CUDA toolkit's compiler, where one is installed.

``$GPU_VECENV_COMPILER`` chooses: ``auto`` (NVRTC where found, else nvcc), ``nvrtc`` or
``nvcc``. Both compile with the same language flags (:data:`COMMON_FLAGS`; ``-fmad=false``
keeps every float operation rounding as torch's separate elementwise kernels do, so the
kernels match the torch reference bit for bit) for the device's own architecture, to a
cubin. Where NVRTC is older than the GPU (it has no cubin target for it), it emits PTX for
its newest architecture instead, which the driver compiles at load.

A kernel file is compiled once per (source, headers, flags, compiler and version, target):
the image lands in ``$GPU_VECENV_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpu_vecenv``, else
``~/.cache/gpu_vecenv`` — never inside the installed package — under a name that hashes
all of those. Sizes (``num_envs``) are kernel arguments, so one image serves every size.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gpu_vecenv.backends import driver, nvrtc


def _cuda_src() -> Path:
    import gpu_vecenv.cuda_src

    return Path(gpu_vecenv.cuda_src.__file__).resolve().parent


CUDA_SRC = _cuda_src()
"""The kernel sources, as installed (the package ``gpu_vecenv.cuda_src``)."""

COMMON_FLAGS = ("-std=c++17", "-fmad=false", "-Xptxas=-O3")
"""Flags of every kernel build, under either compiler. ``-fmad=false``: a float multiply and
add never fuse, so each operation rounds like torch's separate elementwise kernels."""

NVCC_FLAGS = ("-O3", *COMMON_FLAGS)
"""nvcc's flags (``-O3`` is nvcc's host-side optimisation; NVRTC has no host side)."""

COMPILERS = ("auto", "nvrtc", "nvcc")


class CudaCompileError(RuntimeError):
    """A compiler rejected a kernel file; the message names the file, the compiler and
    holds its log."""


class KernelsUnavailable(RuntimeError):
    """The kernels cannot be built or loaded on this machine; the message says why and
    what fixes it (no compiler, a GPU or driver the compiler cannot serve, ...)."""


# -- the compiler --


@dataclass(frozen=True)
class Compiler:
    """The compiler a build uses: ``kind`` is ``"nvrtc"`` or ``"nvcc"``."""

    kind: str
    version: str
    location: str
    identity: str
    """What the cache key hashes (kind, version and build)."""
    nvrtc: nvrtc.Nvrtc | None = None

    def describe(self) -> str:
        return f"{'NVRTC' if self.kind == 'nvrtc' else 'nvcc'} {self.version} ({self.location})"


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


@functools.lru_cache(maxsize=4)
def nvcc_version(nvcc: str) -> str:
    """The full ``nvcc --version`` text."""
    result = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise KernelsUnavailable(f"{nvcc} --version failed: {result.stderr.strip()}")
    return result.stdout


def compiler_setting() -> str:
    """``$GPU_VECENV_COMPILER`` (``auto`` when unset), validated."""
    setting = os.environ.get("GPU_VECENV_COMPILER", "").strip().lower() or "auto"
    if setting not in COMPILERS:
        raise ValueError(f"GPU_VECENV_COMPILER must be one of {COMPILERS}, got {setting!r}")
    return setting


def _nvrtc_compiler() -> Compiler | None:
    found = nvrtc.find_nvrtc()
    if found is None:
        return None
    version = f"{found.version[0]}.{found.version[1]}"
    try:
        build = str(os.path.getsize(found.path))
    except OSError:
        build = found.path
    return Compiler("nvrtc", version, found.path, f"nvrtc {version} {build}", found)


def _nvcc_compiler() -> Compiler | None:
    nvcc = find_nvcc()
    if nvcc is None:
        return None
    text = nvcc_version(nvcc)
    match = re.search(r"V(\d+\.\d+\.\d+)", text)
    return Compiler("nvcc", match.group(1) if match else "?", nvcc, text)


def choose_compiler(setting: str | None = None) -> Compiler:
    """The compiler for ``setting`` (default: ``$GPU_VECENV_COMPILER``).

    Raises:
        KernelsUnavailable: the chosen compiler (or, for ``auto``, either) is not found.
    """
    setting = setting or compiler_setting()
    if setting in ("auto", "nvrtc"):
        found = _nvrtc_compiler()
        if found is not None:
            return found
        if setting == "nvrtc":
            raise KernelsUnavailable(f"NVRTC (libnvrtc.so) is not found: {nvrtc.install_hint()}")
    found = _nvcc_compiler()
    if found is not None:
        return found
    if setting == "nvcc":
        raise KernelsUnavailable("nvcc (the CUDA compiler) is not on PATH and CUDA_HOME is not "
                                 "set (GPU_VECENV_COMPILER=nvcc)")
    raise KernelsUnavailable(f"no CUDA compiler: NVRTC (libnvrtc.so) is not found "
                             f"({nvrtc.install_hint()}) and nvcc is not on PATH")


# -- targets --


@dataclass(frozen=True)
class Target:
    """What a build produces: machine code (cubin) for ``sm_<arch>``, or PTX for
    ``compute_<arch>`` that the driver compiles for the GPU at load."""

    arch: int
    ptx: bool = False

    @property
    def name(self) -> str:
        return f"{'compute' if self.ptx else 'sm'}_{self.arch}"

    @property
    def suffix(self) -> str:
        return "ptx" if self.ptx else "cubin"


def parse_arch(text: str) -> tuple[int, int]:
    """``"sm_90"``, ``"90"``, ``"9.0"`` -> ``(9, 0)``."""
    match = re.fullmatch(r"(?:sm_|compute_)?(\d+)(?:\.(\d))?", text.strip().lower())
    if not match:
        raise ValueError(f"not a GPU architecture: {text!r} (write it as sm_90)")
    if match.group(2) is not None:
        return int(match.group(1)), int(match.group(2))
    digits = match.group(1)
    if len(digits) < 2:
        raise ValueError(f"not a GPU architecture: {text!r} (write it as sm_90)")
    return int(digits[:-1]), int(digits[-1])


def target_for(capability: tuple[int, int], compiler: Compiler) -> Target:
    """The build target for a GPU of compute ``capability`` under ``compiler``.

    nvcc: always its cubin. NVRTC: the GPU's own cubin where NVRTC has it; else a cubin
    of the same major version and a lower minor (binary compatible), else PTX of
    NVRTC's newest architecture below the GPU's (the driver compiles it at load).

    Raises:
        KernelsUnavailable: NVRTC only targets newer GPUs than this one.
    """
    arch = capability[0] * 10 + capability[1]
    if compiler.kind == "nvcc":
        return Target(arch)
    archs = compiler.nvrtc.archs
    if arch in archs:
        return Target(arch)
    same_major = [a for a in archs if a // 10 == capability[0] and a < arch]
    if same_major:
        return Target(max(same_major))
    older = [a for a in archs if a < arch]
    if older:
        return Target(max(older), ptx=True)
    raise KernelsUnavailable(
        f"{compiler.describe()} compiles for sm_{min(archs)} and newer GPUs, this one is "
        f"sm_{arch}: install the NVRTC of an older CUDA (e.g. pip install "
        f"'nvidia-cuda-nvrtc-cu12==12.*' with a CUDA 12 build of torch) or set "
        f"GPU_VECENV_COMPILER=nvcc with a toolkit that still supports it")


# -- sources and the cache --


def cache_dir() -> Path:
    """Where compiled kernels are kept (created on first use)."""
    explicit = os.environ.get("GPU_VECENV_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpu_vecenv"


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
    """Every header a kernel file may include: ``common/*.cuh`` and those beside the kernel
    files (``tag_layout.cuh``, ...)."""
    return sorted(CUDA_SRC.rglob("*.cuh"))


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


def nvrtc_options(source: Path, target: Target, extra_flags: tuple[str, ...] = ()) -> list[str]:
    """NVRTC's options for ``source``: the same language flags and include path as nvcc's
    (NVRTC does not search the source's own folder by itself: it is added)."""
    return [f"-arch={target.name}", *COMMON_FLAGS, f"-I{CUDA_SRC}", f"-I{source.parent}",
            *extra_flags]


def cache_key(source: Path, target: Target, compiler: Compiler,
              extra_flags: tuple[str, ...] = ()) -> str:
    """Hash of the source, every header of ``cuda_src/``, the flags, the compiler and the
    target."""
    digest = hashlib.sha256()
    for file in (source, *_headers()):
        digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
    digest.update(" ".join((target.name, *COMMON_FLAGS, *extra_flags)).encode())
    digest.update(compiler.identity.encode())
    return digest.hexdigest()[:24]


@dataclass(frozen=True)
class Build:
    """One compiled kernel file in the cache."""

    path: Path
    target: Target
    compiler: Compiler
    seconds: float
    """Compile time (0 when the cache already held it)."""
    cached: bool
    log: str = ""
    """The compiler's messages (warnings) when it built the file; empty if none."""


def compile_kernel(
    name: str, capability: tuple[int, int], extra_flags: tuple[str, ...] = (),
    path: str | os.PathLike | None = None, compiler: Compiler | None = None,
) -> Build:
    """Compile ``cuda_src/<name>.cu`` (or ``path``) for a GPU of compute ``capability``
    with ``extra_flags`` (e.g. ``-D`` sizes), or find it in the cache.

    Raises:
        KernelsUnavailable: no compiler, or none that targets this GPU.
        CudaCompileError: the compiler rejected the file (its log is in the message).
    """
    compiler = compiler or choose_compiler()
    source = source_path(name, path)
    target = target_for(capability, compiler)
    key = cache_key(source, target, compiler, tuple(extra_flags))
    destination = cache_dir() / f"{name}-{target.name}-{compiler.kind}-{key}.{target.suffix}"
    if destination.is_file():
        return Build(destination, target, compiler, 0.0, cached=True)
    destination.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if compiler.kind == "nvrtc":
        options = nvrtc_options(source, target, tuple(extra_flags))
        try:
            image, log = compiler.nvrtc.compile(source, options, ptx=target.ptx)
        except nvrtc.NvrtcError as exc:
            raise CudaCompileError(str(exc)) from None
        _write_atomically(destination, image)
    else:
        log = _compile_with_nvcc(compiler.location, source, destination, capability,
                                 tuple(extra_flags))
    return Build(destination, target, compiler, time.perf_counter() - start, cached=False,
                 log=log)


def _write_atomically(destination: Path, data: bytes) -> None:
    """Write next to the target and rename: concurrent processes never see half a file."""
    fd, tmp = tempfile.mkstemp(suffix=destination.suffix, dir=destination.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, destination)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _compile_with_nvcc(nvcc: str, source: Path, destination: Path,
                       capability: tuple[int, int], extra_flags: tuple[str, ...]) -> str:
    fd, tmp = tempfile.mkstemp(suffix=".cubin", dir=destination.parent)
    os.close(fd)
    try:
        command = build_command(nvcc, source, Path(tmp), capability, extra_flags)
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        output = (result.stderr + result.stdout).strip()
        if result.returncode != 0:
            raise CudaCompileError(
                f"nvcc failed to compile {source} (exit {result.returncode}):\n{output}\n"
                f"command: {' '.join(command)}"
            )
        os.replace(tmp, destination)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return output


# -- loading --

_ModuleKey = tuple[str, int, "str | None", tuple[str, ...], str]
_modules: dict[_ModuleKey, driver.Module] = {}


def load_module(name: str, device_index: int, path: str | os.PathLike | None = None,
                extra_flags: tuple[str, ...] = ()) -> driver.Module:
    """The kernels of ``cuda_src/<name>.cu`` (or ``path``), compiled for CUDA device
    ``device_index`` with ``extra_flags`` and loaded into its primary context, the one
    torch's runtime uses (once per process and flag set).

    Raises:
        KernelsUnavailable: no compiler for this GPU, or the driver cannot load the image.
        CudaCompileError: the compiler rejected the file.
    """
    import torch

    setting = compiler_setting()
    key = (name, device_index, None if path is None else str(path), tuple(extra_flags), setting)
    module = _modules.get(key)
    if module is not None:
        return module
    capability = torch.cuda.get_device_capability(device_index)
    build = compile_kernel(name, capability, tuple(extra_flags), path=path,
                           compiler=choose_compiler(setting))
    try:
        module = driver.Module(build.path.read_bytes() + (b"\0" if build.target.ptx else b""),
                               device_index, what=f"{build.path.name}")
    except driver.DriverError as exc:
        hint = ""
        if build.compiler.kind == "nvrtc":
            major, minor = driver.driver_version()
            hint = (f"\nThe driver supports CUDA {major}.{minor}, the code comes from "
                    f"{build.compiler.describe()}: a newer NVIDIA driver, or the NVRTC of "
                    f"torch's CUDA version ({nvrtc.install_hint()}), fixes this.")
        raise KernelsUnavailable(f"{exc}{hint}") from None
    _modules[key] = module
    return module


def kernels_problem(device_index: int) -> str | None:
    """Why kernels cannot be built for CUDA device ``device_index`` (``None``: they can).

    Cheap (no compile): finds the compiler and the target and compares NVRTC's CUDA
    version with the driver's. A compile or load that still fails raises later, from
    :func:`load_module`.
    """
    import torch

    try:
        driver.libcuda()
    except OSError as exc:
        return f"the NVIDIA driver library libcuda.so.1 cannot be loaded ({exc})"
    try:
        compiler = choose_compiler()
        target = target_for(torch.cuda.get_device_capability(device_index), compiler)
    except (KernelsUnavailable, ValueError) as exc:
        return str(exc)
    if compiler.kind == "nvrtc":
        made = tuple(compiler.nvrtc.version)
        supported = driver.driver_version()
        # A cubin of a newer minor version loads (CUDA's minor version compatibility);
        # a newer major version, or PTX newer than the driver, does not.
        if made[0] > supported[0] or (target.ptx and made > supported):
            return (f"{compiler.describe()} makes code for CUDA {made[0]}.{made[1]}, the "
                    f"NVIDIA driver supports CUDA {supported[0]}.{supported[1]}: update the "
                    f"driver, or use the NVRTC of torch's CUDA version ({nvrtc.install_hint()})")
    return None
