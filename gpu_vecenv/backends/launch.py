"""Kernel launches on torch's current stream, including inside CUDA-graph capture.

PyCUDA loads our cubins and launches a prepared kernel with one cheap call, but only on
the legacy default stream or on streams PyCUDA created itself: it cannot take a raw
``cudaStream_t`` such as torch's side streams or the stream ``torch.cuda.graph`` captures
on. :class:`Kernel` therefore has two paths:

- torch's current stream is the default stream (handle 0, the usual case): PyCUDA's
  ``prepared_async_call`` — the fastest host path;
- any other stream: the driver's ``cuLaunchKernel`` through ctypes, with the same packed
  argument buffer (``CU_LAUNCH_PARAM_BUFFER_POINTER``, the way PyCUDA passes arguments),
  on torch's stream handle. Such launches are ordered like any torch op on that stream
  and are captured into CUDA graphs.

The driver-side function comes from a second load of the same cubin into the same
(primary) context, made when the backend is built (never during a capture).
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import torch

_CU_LAUNCH_PARAM_END = 0
_CU_LAUNCH_PARAM_BUFFER_POINTER = 1
_CU_LAUNCH_PARAM_BUFFER_SIZE = 2

_libcuda: ctypes.CDLL | None = None


def libcuda() -> ctypes.CDLL:
    """The CUDA driver library, with the signatures used here declared."""
    global _libcuda
    if _libcuda is None:
        lib = ctypes.CDLL("libcuda.so.1")
        vp, u = ctypes.c_void_p, ctypes.c_uint
        lib.cuModuleLoadData.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p]
        lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_char_p]
        lib.cuLaunchKernel.argtypes = [vp, u, u, u, u, u, u, u, vp, ctypes.POINTER(vp),
                                       ctypes.POINTER(vp)]
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuFuncSetAttribute.argtypes = [vp, ctypes.c_int, ctypes.c_int]
        for name in ("cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel",
                     "cuGetErrorString", "cuFuncSetAttribute"):
            getattr(lib, name).restype = ctypes.c_int
        _libcuda = lib
    return _libcuda


def check(result: int, what: str) -> None:
    """Raise ``RuntimeError`` naming ``what`` and the driver's error text if ``result`` != 0."""
    if result != 0:
        text = ctypes.c_char_p()
        libcuda().cuGetErrorString(result, ctypes.byref(text))
        message = text.value.decode() if text.value else "unknown error"
        raise RuntimeError(f"{what} failed: CUDA driver error {result} ({message})")


_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_DEFAULT_SHARED_LIMIT = 48 * 1024

_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_raw_stream(device_index: int) -> int:
    """The ``cudaStream_t`` of torch's current stream on the device, as an int.

    ``torch.cuda.current_stream()`` costs several microseconds of Python per call (half of
    a 1-env ``step()`` in a profile on the H200); torch's own compiled code reads the handle
    through ``torch._C._cuda_getCurrentRawStream``, used here when present.
    """
    if _RAW_STREAM is not None:
        return _RAW_STREAM(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


class DriverModule:
    """A cubin loaded through the driver API into the current context (the device's
    primary context: the caller makes it current)."""

    def __init__(self, image: bytes):
        handle = ctypes.c_void_p()
        check(libcuda().cuModuleLoadData(ctypes.byref(handle), image), "cuModuleLoadData")
        self.handle = handle

    def function(self, name: str) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        check(libcuda().cuModuleGetFunction(ctypes.byref(handle), self.handle, name.encode()),
              f"cuModuleGetFunction({name})")
        return handle


class Kernel:
    """One kernel of a loaded cubin, prepared with a fixed argument format.

    Args:
        module: the PyCUDA module (see :func:`gpu_vecenv.backends.compiler.load_module`).
        driver_module: the :class:`DriverModule` of the same cubin
            (:func:`gpu_vecenv.backends.compiler.load_driver_module`).
        name: the kernel's name.
        arg_format: PyCUDA/struct format of the arguments (``"f"`` float32, ``"i"``
            int32, ``"P"`` pointer), in order; packed with native alignment, as PyCUDA
            and the C compiler lay them out.
        device_index: the CUDA device.
        shared_bytes: dynamic shared memory per block (``extern __shared__``); above
            48 KiB the kernel is opted in to more (up to the device's limit).
    """

    def __init__(self, module: Any, driver_module: DriverModule, name: str, arg_format: str,
                 device_index: int, shared_bytes: int = 0):
        self.name = name
        self.arg_format = arg_format
        self.shared_bytes = int(shared_bytes)
        self._pycuda = module.get_function(name)
        self._pycuda.prepare(arg_format)
        self._driver_function = driver_module.function(name)
        self.device_index = device_index
        if self.shared_bytes > _DEFAULT_SHARED_LIMIT:
            import pycuda.driver as cuda

            self._pycuda.set_attribute(
                cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, self.shared_bytes)
            check(libcuda().cuFuncSetAttribute(
                self._driver_function, _CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                self.shared_bytes), f"cuFuncSetAttribute({name})")

    def __call__(self, grid: tuple[int, int, int], block: tuple[int, int, int],
                 args: tuple) -> None:
        """Launch on torch's current stream of the kernel's device (which must be torch's
        current device: the driver launches into the thread's current context)."""
        stream = current_raw_stream(self.device_index)
        if stream == 0:
            self._pycuda.prepared_async_call(grid, block, None, *args,
                                             shared_size=self.shared_bytes)
        else:
            self.launch_on(stream, grid, block, args)

    def launch_on(self, stream: int, grid: tuple[int, int, int],
                  block: tuple[int, int, int], args: tuple) -> None:
        """Launch through the driver API on the raw stream handle ``stream``."""
        packed = struct.pack(self.arg_format, *args)
        buffer = ctypes.create_string_buffer(packed, len(packed))
        size = ctypes.c_size_t(len(packed))
        extra = (ctypes.c_void_p * 5)(
            _CU_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(buffer),
            _CU_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size), _CU_LAUNCH_PARAM_END)
        check(libcuda().cuLaunchKernel(self._driver_function, *grid, *block, self.shared_bytes,
                                       ctypes.c_void_p(stream), None, extra),
              f"cuLaunchKernel({self.name})")
