"""Register our env ids with Gymnasium as soon as Gymnasium is imported.

Run at interpreter start-up by the installed ``gpu_vecenv-gymnasium.pth``. It must stay
cheap: no torch, no gymnasium import of its own. If ``gymnasium`` is already imported it
registers at once; otherwise it waits for the first ``import gymnasium`` through a
one-shot meta-path finder that wraps that module's loader.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings


def _register_quietly() -> None:
    try:
        from gpu_vecenv.entry_points import register_envs

        register_envs()
    except Exception as exc:  # never break `import gymnasium` for the user
        warnings.warn(f"gpu_vecenv could not register its Gymnasium envs: {exc}", stacklevel=2)


class _GymnasiumImportHook:
    """One-shot finder: lets the normal machinery find ``gymnasium`` and runs our
    registration right after the module body has executed."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "gymnasium":
            return None
        _uninstall()
        spec = importlib.util.find_spec("gymnasium")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            _register_quietly()

        loader.exec_module = exec_module
        return spec


_hook = _GymnasiumImportHook()


def _uninstall() -> None:
    if _hook in sys.meta_path:
        sys.meta_path.remove(_hook)


def install() -> None:
    """Arrange for our ids to be registered with Gymnasium (idempotent)."""
    if "gymnasium" in sys.modules:
        _register_quietly()
    elif _hook not in sys.meta_path:
        sys.meta_path.insert(0, _hook)
