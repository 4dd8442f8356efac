"""Draw the plots of docs/performance.md from the data files the page names (no measuring).

    python scripts/plot_performance.py [--out docs]

- ``perf_classic_h200.png``: env-steps/s by env count, CartPole and Pendulum on the CUDA
  kernels, the torch backend and gymnax's scan (``gpu-vecenv bench --vs gymnax``);
- ``perf_capture_h200.png``: CartPole captured roll-outs against gymnax's scan by env count
  (``scripts/bench_capture.py --vs gymnax``);
- ``perf_train_h200.png``: PPO on CartPole, env-steps/s by env count, fused kernels against
  torch ops, both with CUDA graphs (``scripts/bench_train.py``);
- ``perf_torch_h200.png``: µs per ``step()`` of the torch backend's forms at 1 and 1M envs
  (``scripts/bench_torch_backend.py``);
- ``perf_peers_train_h200.png``: training against the peers' own trainers, ours over theirs
  (``scripts/bench_vs_warpdrive_trainer.py``, ``scripts/bench_vs_purejaxrl.py``).

The Tag plot is ``scripts/bench_tag.py --plot``'s own (the page links it where it lies).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gpu_vecenv.bench import plot as plot_by_size  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "docs" / "data"
CLASSIC = DATA / "issue16_h200_2026-11-24h" / "bench_vs_gymnax_h200.json"
CAPTURE = DATA / "issue16_h200_2026-11-24h" / "capture_vs_gymnax_h200.json"
TRAIN = {  # file: the path whose throughput it gives (the newest measurement of each point)
    DATA / "nvrtc_h200" / "bench_train_after.json": (True,),
    DATA / "bench_train_h200_fused.json": (False,),
    DATA / "bench_train_h200_fused_65536.json": (True, False),
}
TORCH = DATA / "nvrtc_h200" / "bench_torch_cuda_before_after.json"
PEERS = DATA / "training_vs_peers_h200"


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def classic(out: Path) -> None:
    records = [dict(r, backend=r["backend"].split(" (")[0])
               for r in _load(CLASSIC)["results"]]
    plot_by_size(records, str(out / "perf_classic_h200.png"))


def capture(out: Path) -> None:
    names = {"gpu_vecenv-captured": "ours, captured (torch.randint policy)",
             "gpu_vecenv-captured-sample_actions": "ours, captured (env.sample_actions())",
             "gymnax-scan": "gymnax scan", "gymnax-scan-trajectory": "gymnax scan + trajectory"}
    records = [dict(env="GPUCartPole-v1", backend=names[r["name"]], num_envs=r["num_envs"],
                    env_steps_per_s=r["env_steps_per_s"]) for r in _load(CAPTURE)["results"]]
    plot_by_size(records, str(out / "perf_capture_h200.png"))


def train(out: Path) -> None:
    rows = [r for path, fused in TRAIN.items() for r in _load(path)["results"]
            if r["mode"] == "throughput" and r.get("cuda_graphs") and r["fused_kernels"] in fused]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for fused, label in ((True, "fused PPO kernels (default)"), (False, "torch ops")):
        points = sorted((r["num_envs"], r["env_steps_per_second"]) for r in rows
                        if r["fused_kernels"] is fused)
        ax.plot(*zip(*points, strict=True), marker="o", label=label)
    ax.set(xscale="log", yscale="log", xlabel="envs (x 16 steps an iteration)",
           ylabel="training env-steps/s", title="PPO, GPUCartPole-v1, CUDA graphs, H200")
    sizes = sorted({r["num_envs"] for r in rows})
    ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "perf_train_h200.png", dpi=120)
    plt.close(fig)


def torch_backend(out: Path) -> None:
    forms = [("old", False, False, "original backend"), ("new", False, False, "default"),
             ("new", True, False, "torch_compile"), ("new", False, True, "torch_graphs"),
             ("new", True, True, "both")]
    rows = _load(TORCH)["results"]
    cases = [(env, n) for env in ("GPUCartPole-v1", "GPUPendulum-v1") for n in (1, 1048576)]
    width = 0.8 / len(forms)
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, (impl, compiled, graphs, label) in enumerate(forms):
        us = {(r["env"], r["num_envs"]): r["us_per_step"] for r in rows
              if (r["impl"], r["compiled"], r["graphs"]) == (impl, compiled, graphs)}
        xs = [c + (i - (len(forms) - 1) / 2) * width for c in range(len(cases))]
        ax.bar(xs, [us.get(case, 0) for case in cases], width, label=label)
    ax.set_xticks(range(len(cases)),
                  [f"{env.removeprefix('GPU')[:-3]}, {n:,} envs" for env, n in cases])
    ax.set(yscale="log", ylabel="µs per step() (copy=False)",
           title="torch backend on the H200 (lower is better)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "perf_torch_h200.png", dpi=120)
    plt.close(fig)


def peers_train(out: Path) -> None:
    warpdrive = _load(PEERS / "vs_warpdrive_trainer_median5_15s.json")["trainers"]
    theirs = warpdrive["warpdrive"]["throughput"]["agent_steps_per_s"]
    bars = [(f"Tag, {name} vs WarpDrive's A2C (agent-steps/s)",
             warpdrive[key]["throughput"]["agent_steps_per_s"] / theirs, 5.0)
            for key, name in (("ours_a2c", "our A2C"), ("ours_ppo", "our PPO"))]
    # One call: throughput at the default (float32-like) products and, at 16,384 envs,
    # with TF32 products (JAX's default there); time to 475 with TF32 products.
    equal = PEERS / "equal_precision"
    for name, label in (("vs_pjx.json", "env-steps/s; ours float32-like"),
                        ("vs_pjx_tf32.json", "env-steps/s, TF32 both"),
                        ("t475_tf32.json", "time to 475 from start, TF32 both")):
        for row in _load(equal / name)["summary"]:
            bars.append((f"CartPole, {row['num_envs']:,} envs, vs PureJaxRL ({label})",
                         row["ratio"], 2.0))
    fig, ax = plt.subplots(figsize=(9.5, 4.4))
    ys = range(len(bars))[::-1]
    ax.barh(ys, [b[1] for b in bars], color="tab:blue")
    ax.scatter([b[2] for b in bars], ys, marker="|", s=400, color="tab:red", zorder=3)
    for y, (_, ratio, _) in zip(ys, bars, strict=True):
        ax.text(ratio, y, f" {ratio:.2f}x", va="center", fontsize=8)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(list(ys), [b[0] for b in bars], fontsize=8)
    ax.set(xlabel="ours / peer, same call (higher is better; red: our target)",
           title="Training against the peers' own trainers, H200",
           xlim=(0, max(5.8, 1.15 * max(b[1] for b in bars))))
    fig.tight_layout()
    fig.savefig(out / "perf_peers_train_h200.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA.parent, help="folder (default docs)")
    out = parser.parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    for draw in (classic, capture, train, torch_backend, peers_train):
        draw(out)
    print(f"wrote 5 plots to {out}")


if __name__ == "__main__":
    main()
