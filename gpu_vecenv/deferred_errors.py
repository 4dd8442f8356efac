"""Invalid actions reported without a per-step host sync (``strict=False``).

Kernels and the torch reference count invalid actions in a device scalar
(``buffers.error_count``) and leave the envs that got them unchanged. On a GPU the count
is copied to pinned host memory every :data:`ERROR_FLAG_INTERVAL` steps, asynchronously,
on a stream of its own (:class:`~gpu_vecenv.backends.flag_copy.FlagCopy`: the steps do not
wait for it), and an env raises once such a copy has arrived and is non-zero;
``check_errors()`` and a full ``reset()`` read the device count at once (a sync; a partial
reset checks like a step). On the CPU reading is free, so every step checks.

While torch's current stream is capturing a CUDA graph nothing here touches the host
(event queries are illegal during capture and a captured copy would never be re-read):
whoever replays the graph calls ``check_errors()`` (the native trainer does so at every
log interval).
"""

from __future__ import annotations

import torch

from gpu_vecenv.backends.flag_copy import FlagCopy

ERROR_FLAG_INTERVAL = 8
"""Steps between asynchronous copies of the device's invalid-action count to the host.
Envs that got an invalid action stay frozen meanwhile, so a later report loses nothing;
the copy and its event cost host time on every call that makes one."""


_IS_CAPTURING = (getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
                 or torch.cuda.is_current_stream_capturing)


def _capturing(device: torch.device) -> bool:
    return device.type == "cuda" and _IS_CAPTURING()


class DeferredErrors:
    """The host's view of a device's invalid-action count ``error_count`` (``()`` int32).

    Args:
        error_count: the device counter the backends increment.
        asynchronous: copy it to the host in the background (a CUDA device with
            ``strict=False``); otherwise :meth:`after_step` asks for a synchronous check.
    """

    def __init__(self, error_count: torch.Tensor, asynchronous: bool):
        self.error_count = error_count
        self.device = error_count.device
        self._host: torch.Tensor | None = None
        self._copy: FlagCopy | None = None
        self._steps_to_copy = 0
        self.may_report = not asynchronous
        """False while :meth:`take` with ``sync=False`` would certainly return 0 (no copy
        of the count is on its way): ``step()`` then skips calling it."""
        if asynchronous:
            self._host = torch.zeros((), dtype=torch.int32, pin_memory=True)
            self._copy = FlagCopy(error_count, self._host)

    def after_step(self) -> bool:
        """Call after every step; True when the caller should check now (synchronously).
        Costs a countdown on most steps (a small env's whole step is ~20 us of host time)."""
        if self._host is None:
            return self.device.type != "cuda"
        self._steps_to_copy -= 1
        if self._steps_to_copy > 0 or _capturing(self.device):
            return False
        self._steps_to_copy = ERROR_FLAG_INTERVAL
        self._copy.start()
        self.may_report = True
        return False

    def take(self, sync: bool) -> int:
        """The number of invalid actions counted since the last report, zeroing the count
        if there were any. With ``sync=False`` only a copy that has already reached the
        host is looked at (0 if none has, or while a graph is being captured)."""
        if self._host is not None and not sync:
            if not self.may_report or _capturing(self.device) or not self._copy.arrived():
                return 0
            self.may_report = False
            if int(self._host) == 0:
                return 0
        if sync and _capturing(self.device):
            raise RuntimeError("check_errors() cannot run while a CUDA graph is captured")
        if self._copy is not None:
            # A copy still on its way would land after the zeroing below and report the
            # same invalid actions again.
            self._copy.wait()
        count = int(self.error_count)
        if count:
            self.error_count.zero_()
            if self._host is not None:
                self._host.zero_()
        return count
