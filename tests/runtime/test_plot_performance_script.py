"""``scripts/plot_performance.py`` redraws docs/performance.md's plots from the data files
the page names, without a GPU; the page shows each plot it draws."""

from __future__ import annotations

from pathlib import Path

from tests.script_modules import load_script

ROOT = Path(__file__).resolve().parents[2]


def test_redraws_every_plot_of_the_page_from_its_data(tmp_path):
    module = load_script("plot_performance")
    module.main(["--out", str(tmp_path)])
    drawn = sorted(p.name for p in tmp_path.glob("*.png"))
    assert drawn == ["perf_capture_h200.png", "perf_classic_h200.png",
                     "perf_peers_train_h200.png", "perf_torch_h200.png", "perf_train_h200.png"]
    assert all((tmp_path / name).stat().st_size > 10_000 for name in drawn)
    page = (ROOT / "docs" / "performance.md").read_text()
    assert all(f"]({name})" in page and (ROOT / "docs" / name).is_file() for name in drawn)
