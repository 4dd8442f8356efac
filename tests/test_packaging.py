"""Every package of the source tree is one that pyproject.toml installs (an editable install
finds a forgotten one anyway; a wheel would ship without it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_of_gpu_vecenv_is_installed():
    # tomllib is Python >= 3.11; the list is simple enough to read with a pattern
    listing = re.search(r"^packages = \[(.*?)\]", (ROOT / "pyproject.toml").read_text(),
                        re.S | re.M).group(1)
    installed = set(re.findall(r'"([\w.]+)"', listing))
    found = {".".join(("gpu_vecenv", *p.parent.relative_to(ROOT / "gpu_vecenv").parts))
             for p in (ROOT / "gpu_vecenv").rglob("__init__.py")}
    assert found <= installed, f"not in pyproject.toml's packages: {sorted(found - installed)}"
    assert "gpu_vecenv.multi_agent" in installed


def test_every_kernel_source_is_package_data():
    """Every ``.cu`` and ``.cuh`` of cuda_src/ matches a ``gpu_vecenv.cuda_src`` pattern of
    package-data (a header left out compiles here and fails in a wheel)."""
    patterns = re.search(r'^"gpu_vecenv\.cuda_src" = \[(.*?)\]',
                         (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    shipped = {p for pattern in re.findall(r'"([^"]+)"', patterns)
               for p in (ROOT / "cuda_src").glob(pattern)}
    sources = {p for p in (ROOT / "cuda_src").rglob("*") if p.suffix in (".cu", ".cuh")}
    assert sources - shipped == set(), sorted(str(p) for p in sources - shipped)
    assert (ROOT / "cuda_src" / "tag_layout.cuh") in shipped
