"""``scripts/bench_step_host.py --device cpu``: every case runs through the CUDA backends'
step path with the driver calls stubbed, and a step dispatches the torch ops the host-cost
design allows (docs/performance.md, "Classic envs by size": the host's cost)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_step_host.py"


def test_every_case_runs_on_the_stubbed_backends(tmp_path):
    out = tmp_path / "step_host.json"
    subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--steps", "40",
                    "--rounds", "1", "--json", str(out)], check=True, capture_output=True,
                   timeout=300)
    rows = {row["case"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"cartpole 1 copy=False", "cartpole 1 copy=True",
                         "cartpole 1024 randint copy=True", "tag 1x5 copy=False",
                         "tag 1x5 copy=True", "tag 100x105 copy=False",
                         "tag 100x105 copy=True"}
    for row in rows.values():
        assert row["host_us_per_step"] > 0
    # copy=False: no torch op in a step but the deferred error flag's copy and its read,
    # once every 8 steps each (deferred_errors.ERROR_FLAG_INTERVAL)
    for case in ("cartpole 1 copy=False", "tag 1x5 copy=False", "tag 100x105 copy=False"):
        assert rows[case]["torch_ops"] == {"aten::copy_": 0.125, "aten::item": 0.125}, case
