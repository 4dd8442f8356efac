"""Every script, data file and local link the user docs cite exists, so a moved or removed
file cannot leave a stale citation behind (the CHANGELOG, a history, is not checked)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "scripts" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CITED_PATH = re.compile(r"(?<![\w/.])((?:scripts|docs/data|benchmarks)/[\w./-]*\w)")
SHORT_DATA_PATH = re.compile(r"`\.\.\./([\w./-]+?)(\.\*)?`")
"""docs/performance.md's ``.../<folder>/<file>`` short form of a file under docs/data/."""
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _cited(text: str) -> list[str]:
    return [m for m in CITED_PATH.findall(text) if not m.endswith("/")]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_cited_files_exist(doc):
    text = doc.read_text()
    missing = [p for p in _cited(text) if not (ROOT / p).exists()]
    for short, wildcard in SHORT_DATA_PATH.findall(text):
        found = list((ROOT / "docs" / "data").glob(short + (".*" if wildcard else "")))
        if not found:
            missing.append(f".../{short}")
    links = [link for link in LINK.findall(text) if "://" not in link]
    missing += [link for link in links if not (doc.parent / link).exists()]
    assert not missing, f"{doc.relative_to(ROOT)} cites files that do not exist: {missing}"


def test_the_checks_find_what_they_look_for():
    """The patterns see the forms the docs use (else the test above would pass vacuously)."""
    text = (ROOT / "docs" / "performance.md").read_text()
    assert "scripts/bench_tag.py" in _cited(text)
    assert "docs/data/nvrtc_h200/bench_torch_cuda_before_after.json" in _cited(text)
    assert ("issue16_h200_2026-11-24h/bench_tag_vs_warpdrive_h200", ".*") in \
        SHORT_DATA_PATH.findall(text)
    assert "perf_classic_h200.png" in LINK.findall(text)
    assert _cited("see `scripts/lab/gpu_tests.sh OUT` and scripts/") == ["scripts/lab/gpu_tests.sh"]


def test_every_lab_script_is_described_and_every_description_has_its_script():
    """scripts/README.md's lab table names each file of scripts/lab/ (by its name there)."""
    text = (ROOT / "scripts" / "README.md").read_text().split("## scripts/lab/")[1]
    described = set(re.findall(r"^\| `([\w/]+\.(?:py|sh))", text, re.MULTILINE))
    lab = ROOT / "scripts" / "lab"
    present = {str(p.relative_to(lab)) for p in lab.rglob("*") if p.suffix in (".py", ".sh")}
    assert described == present
