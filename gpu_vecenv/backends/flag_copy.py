"""A small device-to-host copy that does not hold up the stream it follows.

An env copies its invalid-action count to the host every few steps
(:mod:`gpu_vecenv.deferred_errors`). Queued on the stream the steps run on, that copy
holds up the next step until it is done: on the H200 machine about 2 us a step at
4,194,304 Pendulum envs, one copy every 8 steps (3.5 % of the step). :class:`FlagCopy`
queues it on a stream of its own instead, ordered after the work queued so far on the
step's stream by an event, so the next step starts at once; a second event tells the host
when the copy has landed. Driver calls through ctypes: each costs well under a
microsecond of host time, where switching torch's current stream costs several.
"""

from __future__ import annotations

import ctypes

import torch

from gpu_vecenv.backends import driver
from gpu_vecenv.backends.launch import _CURRENT_DEVICE, current_raw_stream

CU_STREAM_NON_BLOCKING = 1
"""The copy stream does not synchronise with the legacy default stream (torch's default
one): a blocking stream's work would make the next kernel there wait for the copy."""
CU_EVENT_DISABLE_TIMING = 2
CUDA_ERROR_NOT_READY = 600

_vp = ctypes.c_void_p


class FlagCopy:
    """Copies ``source`` (a CUDA tensor) into ``host`` (pinned, same size and dtype) on a
    stream of its own, each copy after the work queued so far on torch's current stream
    of the device.

    Args:
        source: the device tensor to copy (contiguous).
        host: its pinned host destination.
    """

    def __init__(self, source: torch.Tensor, host: torch.Tensor):
        if not (source.is_cuda and host.is_pinned() and source.is_contiguous()
                and host.is_contiguous() and source.nbytes == host.nbytes):
            raise ValueError("FlagCopy copies a contiguous CUDA tensor into a pinned host "
                             "tensor of the same size")
        self.device_index = source.device.index or 0
        self._source, self._host = source, host  # kept alive with the copy
        self._src = ctypes.c_uint64(source.data_ptr())
        self._dst = _vp(host.data_ptr())
        self._bytes = ctypes.c_size_t(source.nbytes)
        self._lib = lib = driver.libcuda()
        # The calls of start() and arrived() without declared argument types: ctypes then
        # skips a conversion per argument, each passed in a form that is right as is.
        self._event_record, self._stream_wait_event, self._copy_async, self._event_query = (
            lib[name] for name in ("cuEventRecord", "cuStreamWaitEvent",
                                   "cuMemcpyDtoHAsync_v2", "cuEventQuery"))
        self._stream, self._ready, self._done = _vp(), _vp(), _vp()
        with driver.current_context(self.device_index):
            driver.check(lib.cuStreamCreate(ctypes.byref(self._stream), CU_STREAM_NON_BLOCKING),
                         "cuStreamCreate")
            for event in (self._ready, self._done):
                driver.check(lib.cuEventCreate(ctypes.byref(event), CU_EVENT_DISABLE_TIMING),
                             "cuEventCreate")
        self.started = False
        """Whether any copy was started (:meth:`arrived` and :meth:`wait` are about the last)."""

    def start(self) -> None:
        """Copy once the work queued so far on torch's current stream of the device is
        done, without making later work there wait."""
        device_index = self.device_index
        if _CURRENT_DEVICE() != device_index:  # the copy's stream is in that device's context
            with torch.cuda.device(device_index):
                self.start()
            return
        stream = current_raw_stream(device_index)
        after = _vp(stream) if stream else None
        side = self._stream
        result = (self._event_record(self._ready, after)
                  or self._stream_wait_event(side, self._ready, 0)
                  or self._copy_async(self._dst, self._src, self._bytes, side)
                  or self._event_record(self._done, side))
        if result:
            driver.check(result, "the invalid-action count's copy (cuEventRecord, "
                                 "cuStreamWaitEvent, cuMemcpyDtoHAsync)")
        self.started = True

    def arrived(self) -> bool:
        """Whether the last copy started has landed in ``host`` (True if none was)."""
        result = self._event_query(self._done)
        if result == CUDA_ERROR_NOT_READY:
            return False
        driver.check(result, "cuEventQuery")
        return True

    def wait(self) -> None:
        """Block until the last copy started has landed."""
        if self.started:
            driver.check(self._lib.cuEventSynchronize(self._done), "cuEventSynchronize")

    def __del__(self) -> None:
        lib = getattr(self, "_lib", None)
        if lib is None:
            return
        try:  # at interpreter exit the driver may be gone already: nothing left to free
            if self.started:  # the pinned destination may be reused once this is gone
                lib.cuEventSynchronize(self._done)
            for event in (self._ready, self._done):
                if event.value:
                    lib.cuEventDestroy_v2(event)
            if self._stream.value:
                lib.cuStreamDestroy_v2(self._stream)
        except Exception:  # noqa: BLE001
            pass
