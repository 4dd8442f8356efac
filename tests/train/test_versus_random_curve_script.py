"""scripts/tag_versus_random_curve.py on a tiny CPU run with kept checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.trainer import Trainer

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "tag_versus_random_curve.py"


def test_one_row_per_kept_checkpoint_with_the_four_cells_and_the_seconds(tmp_path):
    config = load_config("tag_cpu", [], num_envs=2, total_steps=2 * 10 * 32 * 2,
                         device="cpu", run_dir=str(tmp_path / "run"), eval_episodes=0,
                         progress=False, tensorboard=False, checkpoint_interval=1,
                         log_interval=1, keep_checkpoints=True)
    Trainer(config).run()
    out = tmp_path / "curve.json"
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "run"), str(out),
                             "--episodes", "1", "--device", "cpu"],
                            capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = json.loads(out.read_text())
    assert [r["global_step"] for r in rows] == [640, 1280]
    for row in rows:
        assert row["seconds"] is not None and row["seconds"] > 0
        assert set(row["cells"]) == {f"{t}_taggers_{r}_runners" for t in ("trained", "random")
                                     for r in ("trained", "random")}
        assert set(row["entropy"]) == {"tagger", "runner"} and row["runners_per_game"] == 8
