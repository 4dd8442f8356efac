"""Plot a Tag training run's curve from its metrics.jsonl: runners tagged per game, game
length (the taggers' episode length: a game ends when every runner is tagged or after
``episode_length`` steps) and both policies' entropy, against agent-steps.

    python scripts/plot_tag_training.py RUN_DIR/metrics.jsonl out.png [--taggers 10 --tag-reward 10]
"""

from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics")
    parser.add_argument("output")
    parser.add_argument("--taggers", type=int, default=10)
    parser.add_argument("--tag-reward", type=float, default=10.0)
    parser.add_argument("--random-tagged", type=float, default=None,
                        help="runners tagged per game under random play (a reference line)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.metrics)]
    games = [r for r in rows if "tagger/episode_return" in r]
    steps = [r["global_step"] / 1e6 for r in games]
    tagged = [r["tagger/episode_return"] * args.taggers / args.tag_reward for r in games]
    length = [r["tagger/episode_length"] for r in games]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    axes[0].plot(steps, tagged, label="trained (sampled actions)")
    if args.random_tagged is not None:
        axes[0].axhline(args.random_tagged, color="gray", ls="--", label="random play")
    axes[0].set(title="runners tagged per game", xlabel="agent-steps (M)")
    axes[0].legend()
    axes[1].plot(steps, length)
    axes[1].set(title="game length (steps)", xlabel="agent-steps (M)")
    all_steps = [r["global_step"] / 1e6 for r in rows]
    for name in ("tagger", "runner"):
        axes[2].plot(all_steps, [r[f"{name}/entropy"] for r in rows], label=name)
    axes[2].set(title="policy entropy (nats)", xlabel="agent-steps (M)")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=90)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
