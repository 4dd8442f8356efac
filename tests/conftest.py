"""Shared test set-up.

- The ``gpu`` marker: where torch sees no CUDA GPU, the ``gpu`` tests are deselected and
  one line at the end says how many and why (a skip line per test told nothing more).
  On a GPU machine they run; ``pytest -m gpu`` runs only them. A GPU machine without a
  kernel compiler does not deselect them: the CUDA tests fail there, saying what is
  missing (the kernels need no more than a CUDA build of torch).
- The ``slow`` marker (tests of 20 s or more each on 2 cores: the multi-architecture
  NVRTC compile, Tag's nvcc build, the Tag kernel's host emulation at 100 agents or more,
  learning runs to a return): ``addopts`` in pyproject.toml leaves them out of
  ``pytest``, and one line at the end says how many; ``pytest -m slow`` runs only them (CI
  runs them after the rest, ``.ci/run``).
- ``ATEN_CPU_CAPABILITY`` set (``default``, ``avx2``, ...: how to run the suite as on
  another CPU): torch.compile's cache gets a folder of its own for that setting.
  Inductor keys its cached C++ without it, so code compiled for this CPU's vector units
  and reused under ``default`` fails to build (``'at::vec' has not been declared``).
- Env ids: every test starts and ends with only the shipped ids registered, so an env
  that a test registers (or that a tutorial module registers when a test file imports
  it at collection) never leaks into another test.
- torch's float32 matrix-product precision: every test ends with the one it started
  with. A trainer sets its config's ``trainer.matmul_precision`` until it is closed (the
  Tag configs ship TF32, ``high``); a test that leaves one open must not turn a later
  test's float32 reference (autograd against the fused kernels, say) into TF32.
- ``hard_time_limit``: a GPU test that uses it ends its process after 300 s with every
  thread's traceback instead of hanging the suite.
"""

from __future__ import annotations

import faulthandler
import getpass
import os
import sys
import tempfile

if "ATEN_CPU_CAPABILITY" in os.environ and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(  # before torch is imported
        tempfile.gettempdir(),
        f"torchinductor_{getpass.getuser()}_{os.environ['ATEN_CPU_CAPABILITY'].lower()}")

import pytest  # noqa: E402
import torch  # noqa: E402

_deselected_gpu_tests: list[str] = []
_deselected_slow_tests: list[str] = []


def _gpu_missing() -> str | None:
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _gpu_missing()
    if reason is None:
        return
    gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu:
        return
    items[:] = [item for item in items if item.get_closest_marker("gpu") is None]
    config.hook.pytest_deselected(items=gpu)
    _deselected_gpu_tests[:] = [reason, *(item.nodeid for item in gpu)]


def pytest_deselected(items):
    _deselected_slow_tests.extend(item.nodeid for item in items
                                  if item.get_closest_marker("slow") is not None
                                  and item.get_closest_marker("gpu") is None)


def pytest_terminal_summary(terminalreporter):
    if _deselected_gpu_tests:
        reason, *tests = _deselected_gpu_tests
        terminalreporter.write_line(
            f"{len(tests)} gpu tests deselected: {reason} (they run on a GPU machine; "
            "`pytest -m gpu` runs only them)"
        )
    if _deselected_slow_tests:
        terminalreporter.write_line(
            f"{len(_deselected_slow_tests)} slow tests deselected (up to minutes each on 2 "
            "cores: kernel compiles, large kernel emulations, learning runs): `pytest -m slow` "
            "runs them; CI does"
        )


def _forget_custom_env_ids() -> None:
    """Drop every id registered since start-up, from our table and from Gymnasium's."""
    from gpu_vecenv.env_ids import ENVS, SHIPPED_IDS

    gymnasium = sys.modules.get("gymnasium")
    for env_id in [i for i in ENVS if i not in SHIPPED_IDS]:
        del ENVS[env_id]
        spec = gymnasium.registry.get(env_id) if gymnasium is not None else None
        if spec is not None and str(spec.entry_point).startswith("gpu_vecenv.entry_points:"):
            del gymnasium.registry[env_id]


@pytest.fixture(autouse=True)
def _only_shipped_env_ids():
    _forget_custom_env_ids()
    gymnasium = sys.modules.get("gymnasium")
    gymnasium_ids = dict(gymnasium.registry) if gymnasium is not None else None
    yield
    _forget_custom_env_ids()
    if gymnasium_ids is not None:  # a test that overrode a Gymnasium id gets it back
        gymnasium.registry.clear()
        gymnasium.registry.update(gymnasium_ids)


@pytest.fixture(autouse=True)
def _float32_matmul_precision_restored():
    before = torch.get_float32_matmul_precision()
    yield
    if torch.get_float32_matmul_precision() != before:
        torch.set_float32_matmul_precision(before)


@pytest.fixture
def hard_time_limit():
    """A hang (the compiler, a capture, a device wait) ends the test process after 300 s,
    with every thread's traceback, instead of blocking the suite."""
    faulthandler.dump_traceback_later(300, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()
