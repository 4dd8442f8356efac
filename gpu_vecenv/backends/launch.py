"""Kernel launches on torch's current stream, including inside CUDA-graph capture.

A :class:`Kernel` launches through the driver's ``cuLaunchKernel`` (ctypes) on the raw
handle of torch's current stream, so a launch is ordered like any torch op on that
stream — the default stream, a side stream, or the stream ``torch.cuda.graph`` captures
on. The arguments travel as one packed buffer (``CU_LAUNCH_PARAM_BUFFER_POINTER``),
allocated once per kernel: a launch packs the values into it (``struct.pack_into``) and
makes one foreign call. The driver copies the buffer at launch (and at capture), so
reusing it for the next launch is safe.

Host cost per launch, measured on the H200 machine (``scripts/lab/bench_launch.py``): see
docs/performance.md; it is what a 1-env ``step()`` pays on top of Python.
"""

from __future__ import annotations

import ctypes
import struct

import torch

from gpu_vecenv.backends import driver

_CU_LAUNCH_PARAM_END = 0
_CU_LAUNCH_PARAM_BUFFER_POINTER = 1
_CU_LAUNCH_PARAM_BUFFER_SIZE = 2
_DEFAULT_SHARED_LIMIT = 48 * 1024

_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)
# torch.cuda.current_device() re-checks lazy initialisation on every call; a kernel exists
# only once CUDA is initialised, so the launch path reads the device directly.
_CURRENT_DEVICE = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def current_raw_stream(device_index: int) -> int:
    """The ``cudaStream_t`` of torch's current stream on the device, as an int.

    ``torch.cuda.current_stream()`` costs several microseconds of Python per call (half of
    a 1-env ``step()`` in a profile on the H200); torch's own compiled code reads the handle
    through ``torch._C._cuda_getCurrentRawStream``, used here when present.
    """
    if _RAW_STREAM is not None:
        return _RAW_STREAM(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


class Kernel:
    """One kernel of a loaded module, prepared with a fixed argument format.

    Args:
        module: the :class:`~gpu_vecenv.backends.driver.Module` holding it.
        name: the kernel's (``extern "C"``) name.
        arg_format: :mod:`struct` format of the arguments, one letter each (``"f"``
            float32, ``"i"`` int32, ``"P"`` pointer), in order; packed with native
            alignment, as the C compiler lays kernel parameters out.
        shared_bytes: dynamic shared memory per block (``extern __shared__``); above
            48 KiB the kernel is opted in to more (up to the device's limit).
        fixed: values of the first ``len(fixed)`` arguments, which never change (an env's
            constants and buffer pointers): packed once, here; a launch packs the rest.

    Not thread-safe: one thread launches a given ``Kernel`` at a time (each env and
    trainer builds its own).
    """

    def __init__(self, module: driver.Module, name: str, arg_format: str,
                 shared_bytes: int = 0, fixed: tuple = ()):
        if not arg_format.isalpha():
            raise ValueError(f"arg_format must be one letter per argument, got {arg_format!r}")
        self.name = name
        self.device_index = module.device_index
        self.shared_bytes = int(shared_bytes)
        self._function = module.function(name)
        size = struct.calcsize(arg_format)
        self._buffer = ctypes.create_string_buffer(max(size, 1))
        self._size = ctypes.c_size_t(size)
        self._extra = (ctypes.c_void_p * 5)(
            _CU_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(self._buffer),
            _CU_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(self._size), _CU_LAUNCH_PARAM_END)
        self._fixed, self._offset, self._struct = _split(arg_format, tuple(fixed))
        if self._offset:
            struct.pack_into(arg_format[:len(fixed)], self._buffer, 0, *fixed)
        # cuLaunchKernel without declared argtypes: ctypes then skips a conversion per
        # argument (~1 us a launch on the H200 machine's CPU). Every argument is passed in a
        # form whose C representation is right as is: the function and a non-default stream
        # as c_void_p, NULL as None, the dimensions and shared bytes as Python ints (C int:
        # each fits in 31 bits) and the extra array as itself.
        self._launch = driver.libcuda()["cuLaunchKernel"]
        self._launch.restype = ctypes.c_int
        if self.shared_bytes > _DEFAULT_SHARED_LIMIT:
            _allow_dynamic_shared(self._function, self.shared_bytes, name)

    def __call__(self, grid: tuple[int, int, int], block: tuple[int, int, int],
                 args: tuple) -> None:
        """Launch with the arguments after the fixed ones, on torch's current stream of
        the kernel's device.

        The driver launches into the thread's current context, so the kernel's device
        is made torch's current one for the launch if it is not already.
        """
        # One Python frame on the common path (the device is current): every call and
        # attribute lookup here is paid by each step() of a small env.
        device_index = self.device_index
        if _CURRENT_DEVICE() != device_index:
            with torch.cuda.device(device_index):
                self(grid, block, args)
            return
        self._struct.pack_into(self._buffer, self._offset, *self._fixed, *args)
        stream = _RAW_STREAM(device_index) if _RAW_STREAM is not None \
            else current_raw_stream(device_index)
        launch = (self._function, *grid, *block, self.shared_bytes,
                  ctypes.c_void_p(stream) if stream else None, None, self._extra)
        result = self._launch(*launch)
        if result:
            self._retry_or_raise(result, launch)

    def _retry_or_raise(self, result: int, launch: tuple) -> None:
        if result == driver.CUDA_ERROR_INVALID_CONTEXT:
            # A thread that has not touched CUDA through torch's runtime yet has no
            # current context: bind the primary one (torch's) and launch again.
            driver.make_current(self.device_index)
            result = self._launch(*launch)
        if result != 0:
            driver.check(result, f"cuLaunchKernel({self.name})")


def _allow_dynamic_shared(function, shared_bytes: int, name: str) -> None:
    """Let ``function`` launch with ``shared_bytes`` of dynamic shared memory.

    The limit is the function's, shared by every :class:`Kernel` of it (two envs with the
    same kernel and different sizes): it is only ever raised, never lowered below what
    another launch of the function already needs."""
    lib, attribute = driver.libcuda(), driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    current = ctypes.c_int()
    driver.check(lib.cuFuncGetAttribute(ctypes.byref(current), attribute, function),
                 f"cuFuncGetAttribute({name})")
    if current.value < shared_bytes:
        driver.check(lib.cuFuncSetAttribute(function, attribute, shared_bytes),
                     f"cuFuncSetAttribute({name})")


def _split(arg_format: str, fixed: tuple) -> tuple[tuple, int, struct.Struct]:
    """``(values packed per launch before the caller's, byte offset, their Struct)``.

    The variable arguments can be packed on their own at an offset only where they start
    8-byte aligned (then their layout relative to that offset is the absolute one);
    otherwise every launch packs the fixed values too.
    """
    head, tail = arg_format[:len(fixed)], arg_format[len(fixed):]
    if fixed and tail:
        start = struct.calcsize(head + "0" + tail[0])
        if start == struct.calcsize(head + "0P"):
            return (), start, struct.Struct(tail)
    return fixed, 0, struct.Struct(arg_format)
