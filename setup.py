"""Build hook: ship ``gpu_vecenv-gymnasium.pth`` next to the package.

Gymnasium >= 1.0 no longer loads the ``gymnasium.envs`` entry-point group, so this
one-line ``.pth`` file installs a tiny post-import hook (``gpu_vecenv._gymnasium_hook``)
that registers our ids the moment ``gymnasium`` is imported. It imports nothing heavy
(no torch) and does nothing until then. Everything else lives in pyproject.toml.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH_NAME = "gpu_vecenv-gymnasium.pth"
# site.py executes a .pth line only if it starts with "import"; the exec'd guard keeps a
# moved or half-removed install from printing a traceback at every interpreter start.
PTH_LINE = (
    "import sys; exec('try:\\n import gpu_vecenv._gymnasium_hook as h\\n h.install()\\n"
    "except ImportError:\\n pass')\n"
)


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, PTH_NAME)
        with open(target, "w") as f:
            f.write(PTH_LINE)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH_NAME)]


class _StrategyWithPth:
    """Wraps setuptools' editable strategy so editable wheels carry the .pth too."""

    def __init__(self, strategy):
        self._strategy = strategy

    def __call__(self, wheel, files, mapping):
        self._strategy(wheel, files, mapping)
        wheel.writestr(PTH_NAME, PTH_LINE.encode())

    def __enter__(self):
        self._strategy.__enter__()
        return self

    def __exit__(self, *exc):
        return self._strategy.__exit__(*exc)


cmdclass = {"build_py": BuildPyWithPth}
try:  # setuptools >= 64 (PEP 660); _select_strategy is internal, so fail soft
    from setuptools.command.editable_wheel import editable_wheel

    if hasattr(editable_wheel, "_select_strategy"):

        class EditableWheelWithPth(editable_wheel):
            def _select_strategy(self, *args, **kwargs):
                return _StrategyWithPth(super()._select_strategy(*args, **kwargs))

        cmdclass["editable_wheel"] = EditableWheelWithPth
except ImportError:
    pass

setup(cmdclass=cmdclass)
