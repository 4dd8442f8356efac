"""Kernel time of one Tag step (µs), at the five continuous sizes of scripts/bench_tag.py.

Times ``env.backend.step`` alone (no action conversion, no error-flag copy), two ways:

- ``loop``: back-to-back calls between CUDA events, as bench_tag.py's "kernels us" column
  (where the host launches slower than the kernel runs, this is the host's time);
- ``graph``: the same steps captured in one CUDA graph and replayed, so the host is out of
  the measurement (what is left: the kernels and the gaps between graph nodes).

WarpDrive's training configuration (K = min(10, agents - 1)), the actions from a pool of 8
batches drawn on the device beforehand, median of ``--repeats`` runs. 1x5, 100x105,
2000x5 and 2000x105 run one block per game (one launch per step); 200x1000 runs several
blocks per game (one launch per phase).

    python scripts/lab/bench_tag_kernels.py [--steps 200] [--repeats 5]
        [--modes next_step same_step]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from gpu_vecenv.entry_points import make_vec

SIZES = [(1, 1, 4), (100, 5, 100), (2000, 1, 4), (2000, 5, 100), (200, 10, 990)]
"""(games, taggers, runners)."""


def elapsed_us(run, steps: int, repeats: int) -> float:
    """Median µs per step of ``run()`` (which runs ``steps`` steps), between CUDA events."""
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / steps)
    return statistics.median(times)


def time_size(games: int, taggers: int, runners: int, mode: str, steps: int,
              repeats: int) -> tuple[int, float, float]:
    """(blocks per game, loop µs, graph µs) of one step."""
    agents = taggers + runners
    env = make_vec("GPUTag-v0", games, device="cuda", backend="cuda", copy=False,
                   preset="warpdrive_training", autoreset_mode=mode,
                   num_taggers=taggers, num_runners=runners,
                   num_other_agents_observed=min(10, agents - 1))
    env.reset(seed=0)
    nvec = torch.as_tensor(env.single_action_space.nvec, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    pool = [(torch.rand((env.num_envs, 2), generator=gen, device="cuda") * nvec).long()
            for _ in range(8)]
    backend, outputs = env.backend, env._outputs

    def loop():
        for k in range(steps):
            backend.step(pool[k % 8], outputs)

    for _ in range(3):
        loop()
    looped = elapsed_us(loop, steps, repeats)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        loop()  # warm-up on the capture stream
        torch.cuda.current_stream().synchronize()
        with torch.cuda.graph(graph, stream=stream):
            loop()
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    graphed = elapsed_us(graph.replay, steps, repeats)
    env.check_errors()
    blocks = backend.blocks_per_game
    env.close()
    return blocks, looped, graphed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--modes", nargs="+", default=["next_step", "same_step"],
                        choices=["next_step", "same_step", "disabled"])
    args = parser.parse_args()
    print(torch.cuda.get_device_name())
    print(f"{'case':14s} {'mode':10s} {'blocks/game':>11s} {'loop us':>8s} {'graph us':>9s}")
    for mode in args.modes:
        for games, taggers, runners in SIZES:
            blocks, looped, graphed = time_size(games, taggers, runners, mode, args.steps,
                                                args.repeats)
            label = f"tag {games}x{taggers + runners}"
            print(f"{label:14s} {mode:10s} {blocks:11d} {looped:8.1f} {graphed:9.1f}")


if __name__ == "__main__":
    main()
