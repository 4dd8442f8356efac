"""``gpu-vecenv`` ends without Python's teardown once its work is done
(:mod:`gpu_vecenv.fast_exit`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from gpu_vecenv import fast_exit

# A module-level object whose finalizer runs only in Python's teardown, an atexit handler,
# output left in the pipe's buffer, then exit_process(3).
SCRIPT = textwrap.dedent("""
    import atexit, sys, threading, time
    import torch
    from gpu_vecenv.fast_exit import exit_process

    class Finalized:
        def __del__(self):
            sys.stdout.write(" teardown")

    kept = Finalized()
    atexit.register(lambda: sys.stdout.write(" atexit"))
    if "--thread" in sys.argv:
        threading.Thread(target=lambda: (time.sleep(0.3), sys.stdout.write(" thread"))).start()
    sys.stdout.write("work")
    exit_process(3)
""")


def _run(*args, **environ):
    env = {k: v for k, v in os.environ.items()
           if k not in (fast_exit.OFF_ENV, "CUDA_INJECTION64_PATH")}
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True,
                          text=True, timeout=120, env={**env, **environ})


def test_the_teardown_is_skipped_after_the_atexit_handlers_and_a_flush():
    done = _run()
    assert done.returncode == 3, done.stderr
    assert done.stdout == "work atexit"


@pytest.mark.parametrize("args, environ", [
    ((), {fast_exit.OFF_ENV: "0"}),
    ((), {"CUDA_INJECTION64_PATH": "/opt/nsight/libToolsInjection64.so"}),
    (("--thread",), {}),  # Python waits for a thread that is not a daemon
])
def test_pythons_own_exit_where_the_shortcut_could_lose_something(args, environ):
    done = _run(*args, **environ)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("work") and done.stdout.endswith(" teardown")
    assert " atexit" in done.stdout and (" thread" in done.stdout) == bool(args)


def test_the_shortcut_needs_torch_imported_and_no_opt_out():
    assert fast_exit.fast_exit_allowed({"torch": None}, {})
    assert not fast_exit.fast_exit_allowed({}, {})
    assert not fast_exit.fast_exit_allowed({"torch": None}, {fast_exit.OFF_ENV: "0"})
    assert not fast_exit.fast_exit_allowed({"torch": None}, {"CUDA_INJECTION64_PATH": "x"})


def test_the_command_keeps_its_output_and_exit_status():
    """The console script's function: a listing piped to a file arrives whole; a bad
    argument still exits 2 with its message."""
    code = "import sys; sys.argv = ['gpu-vecenv', *sys.argv[1:]]; " \
           "from gpu_vecenv.cli import console_main; console_main()"
    done = subprocess.run([sys.executable, "-c", code, "list"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) >= 7 and done.stdout.endswith("\n"), done.stdout
    assert lines[0].startswith("GPUCartPole-v1") and "GPUTag-v0" in done.stdout
    bad = subprocess.run([sys.executable, "-c", code, "train", "--env", "NoSuchEnv-v0"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "NoSuchEnv-v0" in bad.stderr
