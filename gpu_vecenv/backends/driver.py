"""The CUDA driver API through ctypes: contexts, modules, device attributes.

Everything the kernels need from CUDA beyond torch: load a cubin (or PTX) into the
device's *primary* context — the one torch's runtime uses, retained here, never a new
one — look up its functions and globals, and read device attributes. No PyCUDA, no
toolkit: only ``libcuda.so.1``, which every NVIDIA driver installs. Nothing here runs at
import; the library is opened on first use.
"""

from __future__ import annotations

import ctypes
import functools
from contextlib import contextmanager

_vp, _uint, _int = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int

_SIGNATURES = {
    "cuInit": [_uint],
    "cuDriverGetVersion": [ctypes.POINTER(_int)],
    "cuDeviceGet": [ctypes.POINTER(_int), _int],
    "cuDeviceGetAttribute": [ctypes.POINTER(_int), _int, _int],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(_vp), _int],
    "cuCtxPushCurrent_v2": [_vp],
    "cuCtxPopCurrent_v2": [ctypes.POINTER(_vp)],
    "cuCtxSetCurrent": [_vp],
    "cuModuleLoadDataEx": [ctypes.POINTER(_vp), ctypes.c_char_p, _uint,
                           ctypes.POINTER(_int), ctypes.POINTER(_vp)],
    "cuModuleGetFunction": [ctypes.POINTER(_vp), _vp, ctypes.c_char_p],
    "cuModuleGetGlobal_v2": [ctypes.POINTER(_vp), ctypes.POINTER(ctypes.c_size_t), _vp,
                             ctypes.c_char_p],
    "cuMemcpyDtoH_v2": [_vp, _vp, ctypes.c_size_t],
    "cuFuncSetAttribute": [_vp, _int, _int],
    "cuFuncGetAttribute": [ctypes.POINTER(_int), _int, _vp],
    "cuStreamCreate": [ctypes.POINTER(_vp), _uint],
    "cuStreamDestroy_v2": [_vp],
    "cuEventCreate": [ctypes.POINTER(_vp), _uint],
    "cuEventDestroy_v2": [_vp],
    "cuEventSynchronize": [_vp],
    "cuGetErrorName": [_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [_int, ctypes.POINTER(ctypes.c_char_p)],
}

CUDA_ERROR_INVALID_CONTEXT = 201
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_CU_JIT_ERROR_LOG_BUFFER = 5
_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6


class DriverError(RuntimeError):
    """A CUDA driver call failed; ``code`` is its ``CUresult``."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


@functools.cache
def libcuda() -> ctypes.CDLL:
    """The CUDA driver library with the signatures used here declared.

    Raises:
        OSError: ``libcuda.so.1`` cannot be loaded (no NVIDIA driver on this machine).
    """
    lib = ctypes.CDLL("libcuda.so.1")
    for name, argtypes in _SIGNATURES.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = _int
    return lib


def error_text(result: int) -> str:
    """``"CUDA_ERROR_NAME: description"`` of a ``CUresult``."""
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    libcuda().cuGetErrorName(result, ctypes.byref(name))
    libcuda().cuGetErrorString(result, ctypes.byref(text))
    return (f"{name.value.decode() if name.value else f'error {result}'}: "
            f"{text.value.decode() if text.value else 'unknown error'}")


def check(result: int, what: str) -> None:
    """Raise :class:`DriverError` naming ``what`` and the driver's error if ``result`` != 0."""
    if result != 0:
        raise DriverError(f"{what} failed: {error_text(result)}", result)


@functools.cache
def driver_version() -> tuple[int, int]:
    """The newest CUDA version the installed driver supports, e.g. ``(13, 0)``."""
    version = _int()
    check(libcuda().cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
    return version.value // 1000, version.value % 1000 // 10


def _device(device_index: int) -> int:
    check(libcuda().cuInit(0), "cuInit")
    device = _int()
    check(libcuda().cuDeviceGet(ctypes.byref(device), device_index),
          f"cuDeviceGet({device_index})")
    return device.value


def device_attribute(device_index: int, attribute: int) -> int:
    """A ``CUdevice_attribute`` of CUDA device ``device_index`` (torch's numbering)."""
    value = _int()
    check(libcuda().cuDeviceGetAttribute(ctypes.byref(value), attribute, _device(device_index)),
          f"cuDeviceGetAttribute({attribute})")
    return value.value


@functools.cache
def primary_context(device_index: int) -> ctypes.c_void_p:
    """The primary context of CUDA device ``device_index``, the one torch's runtime uses
    (retained once per process, never released: torch keeps it alive anyway)."""
    import torch

    torch.cuda.init()  # torch's runtime creates the primary context first
    context = _vp()
    check(libcuda().cuDevicePrimaryCtxRetain(ctypes.byref(context), _device(device_index)),
          "cuDevicePrimaryCtxRetain")
    return context


@contextmanager
def current_context(device_index: int):
    """Make the device's primary context current on this thread for the ``with`` body,
    then restore the thread's previous context."""
    check(libcuda().cuCtxPushCurrent_v2(primary_context(device_index)), "cuCtxPushCurrent")
    try:
        yield
    finally:
        check(libcuda().cuCtxPopCurrent_v2(ctypes.byref(_vp())), "cuCtxPopCurrent")


def make_current(device_index: int) -> None:
    """Bind the device's primary context to this thread (a thread that has not used CUDA
    yet has none, and the driver launches into the thread's current context)."""
    check(libcuda().cuCtxSetCurrent(primary_context(device_index)), "cuCtxSetCurrent")


class Module:
    """A cubin or PTX image loaded into the primary context of ``device_index``.

    PTX is compiled by the driver's JIT at load; a JIT failure raises
    :class:`DriverError` with the JIT's log.
    """

    def __init__(self, image: bytes, device_index: int, what: str = "kernel image"):
        self.device_index = device_index
        self.handle = _vp()
        log = ctypes.create_string_buffer(8192)
        options = (_int * 2)(_CU_JIT_ERROR_LOG_BUFFER, _CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        values = (_vp * 2)(ctypes.cast(log, _vp).value, len(log))
        with current_context(device_index):
            result = libcuda().cuModuleLoadDataEx(ctypes.byref(self.handle), image, 2, options,
                                                  values)
        if result != 0:
            detail = log.value.decode(errors="replace").strip()
            raise DriverError(f"loading {what} into CUDA device {device_index} failed: "
                              f"{error_text(result)}" + (f"\n{detail}" if detail else ""),
                              result)

    def function(self, name: str) -> ctypes.c_void_p:
        """The ``CUfunction`` of the kernel ``name`` (an ``extern "C"`` name)."""
        handle = _vp()
        check(libcuda().cuModuleGetFunction(ctypes.byref(handle), self.handle, name.encode()),
              f"cuModuleGetFunction({name})")
        return handle

    def read_global(self, name: str) -> bytes:
        """The bytes of the ``__device__`` variable ``name`` (a synchronous copy)."""
        pointer, size = _vp(), ctypes.c_size_t()
        with current_context(self.device_index):
            check(libcuda().cuModuleGetGlobal_v2(ctypes.byref(pointer), ctypes.byref(size),
                                                 self.handle, name.encode()),
                  f"cuModuleGetGlobal({name})")
            data = ctypes.create_string_buffer(size.value)
            check(libcuda().cuMemcpyDtoH_v2(data, pointer, size), f"reading {name}")
        return data.raw
