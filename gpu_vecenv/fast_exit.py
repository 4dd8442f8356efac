"""The ``gpu-vecenv`` command ends its process without Python's teardown.

Once torch is imported, a process spends about half a second after its last statement
clearing thousands of modules and running C++ destructors (on an H200 machine 0.57-0.63 s
for a process that made one CUDA tensor, 0.13 s with ``os._exit``; 0.5-0.6 s on a 2-core
CPU machine after ``import torch``), nothing of which a finished command needs: the
operating system frees memory, files and the CUDA context anyway. So the command, once its
work is done, does what Python's exit would do first and skips the rest:

1. if a thread that is not a daemon still runs, Python would wait for it: then exit as
   usual (nothing is skipped);
2. run the ``atexit`` handlers (logging's flush, multiprocessing's clean-up of child
   processes, anything a user module registered);
3. flush ``stdout`` and ``stderr``;
4. ``os._exit(code)``.

Python's usual exit is kept where torch was never imported (nothing to gain), where
``GPU_VECENV_FAST_EXIT=0``, and under a CUDA profiler (Nsight Systems and Nsight Compute
set ``CUDA_INJECTION64_PATH`` and write their data at teardown).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

OFF_ENV = "GPU_VECENV_FAST_EXIT"
"""Set to ``0`` to end ``gpu-vecenv`` with Python's usual teardown."""


def fast_exit_allowed(modules=None, environ=os.environ) -> bool:
    """Whether :func:`exit_process` may skip the teardown (see the module docstring; the
    thread check comes later)."""
    modules = sys.modules if modules is None else modules
    return ("torch" in modules and environ.get(OFF_ENV, "1") != "0"
            and not environ.get("CUDA_INJECTION64_PATH"))


def exit_process(code: int) -> NoReturn:
    """End the process with exit status ``code``: the shortcut of the module docstring
    where it applies, else ``sys.exit(code)``."""
    others = [t for t in threading.enumerate()
              if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if others or not fast_exit_allowed():
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed, or a broken pipe
            pass
    os._exit(code)
