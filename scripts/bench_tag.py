"""Throughput of the Tag kernels: env-steps/s (game steps) and agent-steps/s.

Sizes (games x agents) from the Tag issue, WarpDrive's training configuration (episode
length 500, partial observations of K = min(10, agents - 1) others), random actions
drawn on the device beforehand (a pool of 8 batches), copy=False, NEXT_STEP autoreset,
CUDA events around the timed loop, median of 5 runs. Also: the bytes a step must write
(observations, rewards, flags, state); the host time per step() call and the
backend's kernels alone against the measured device-to-device copy
bandwidth.

``--actions per-step`` draws our actions on the device in every step (one torch.randint, as a
user's loop does) instead of from the pool; ``captured`` runs that loop as one CUDA-graph
replay of ``--steps`` steps (:func:`gpu_vecenv.capture_rollout`, a trajectory recorded);
``sampled`` runs the captured loop with ``env.sample_actions()`` as the policy;
``both`` times pool and per-step, ``all`` the four. ``--vs warpdrive`` (where rl-warp-drive 2.7.1,
its gym and PyCUDA import) then times WarpDrive's TagContinuous on the same continuous cases,
in this process (``benchmarks/warpdrive_peer.py``): its CUDASampler drawing the actions and
its step kernel, as its trainer runs them, and its step kernel alone; it prints our rate over
each, and ``--plot`` draws those ratios.

    python scripts/bench_tag.py [--device cuda] [--backend cuda] [--json out.json]
        [--actions pool|per-step|captured|sampled|both|all] [--vs warpdrive] [--plot ratios.png]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from functools import partial

import torch

from gpu_vecenv.entry_points import make_vec

make_tag = partial(make_vec, "GPUTag-v0")
make_tag_grid = partial(make_vec, "GPUTagGrid-v0")

CASES = [  # (label, maker of the env, games, params)
    ("tag 1x5", make_tag, 1, dict(num_taggers=1, num_runners=4)),
    ("tag 100x105", make_tag, 100, dict(num_taggers=5, num_runners=100)),
    ("tag 2000x5", make_tag, 2000, dict(num_taggers=1, num_runners=4)),
    ("tag 2000x105", make_tag, 2000, dict(num_taggers=5, num_runners=100)),
    ("tag 200x1000", make_tag, 200, dict(num_taggers=10, num_runners=990)),
    ("tag 1x16384", make_tag, 1, dict(num_taggers=16, num_runners=16368)),
    ("grid 1x5", make_tag_grid, 1, {}),
    ("grid 2000x5", make_tag_grid, 2000, {}),
]


def copy_bandwidth(device) -> float:
    """Bytes/s of a large device-to-device copy (read + write counted)."""
    src = torch.empty(1 << 28, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        dst.copy_(src)
    end.record()
    end.synchronize()
    return 2 * src.numel() * 4 * 20 / (start.elapsed_time(end) / 1000)


def bytes_per_step(env) -> int:
    per_slot = env.obs_dim * 4 + 4 + 2  # obs, reward, terminated + truncated
    state = sum(t.element_size() * t.numel() for t in env.buffers.state.values())
    return env.num_envs * per_slot + state


ACTIONS = ("pool", "per-step", "captured", "sampled")
"""Where our actions come from: a pool of 8 batches drawn beforehand; one torch.randint on the
device before every step (as a user's loop has); that loop captured as one CUDA-graph
replay of --steps steps (capture_rollout, a trajectory recorded); or the captured loop with
``env.sample_actions()`` as the policy (the env's own random actions, as WarpDrive's
sampler draws its own)."""


def tag_params(params: dict) -> dict:
    """A continuous case's keyword arguments with K = min(10, agents - 1)."""
    agents = params["num_taggers"] + params["num_runners"]
    return dict(params, num_other_agents_observed=min(10, agents - 1))


def time_case(cls, games, params, device, backend, steps, repeats=5, actions="pool"):
    if cls is make_tag:
        params = tag_params(params)
    env = cls(games, device=device, backend=backend, copy=False, preset="warpdrive_training",
              **params)
    env.reset(seed=0)
    gen = torch.Generator(device=device).manual_seed(0)
    space = env.single_action_space
    if hasattr(space, "nvec"):
        nvec = torch.as_tensor(space.nvec, device=device)

        def draw():
            return (torch.rand((env.num_envs, 2), generator=gen, device=device) * nvec).long()
    else:
        def draw():
            return torch.randint(0, 5, (env.num_envs,), generator=gen, device=device)
    pool = [draw() for _ in range(8)]
    if actions in ("per-step", "captured"):
        # What a user's loop writes: one torch.randint a step on the default generator
        # (both action components have the same number of levels in these presets).
        high = int(space.nvec[0]) if hasattr(space, "nvec") else int(space.n)
        uniform = not hasattr(space, "nvec") or len(set(int(n) for n in space.nvec)) == 1
        shape = tuple(pool[0].shape)

        def action(k):
            return torch.randint(0, high, shape, device=device) if uniform else draw()
    else:
        def action(k):
            return pool[k % 8]
    if actions in ("captured", "sampled"):
        from gpu_vecenv.captured_rollout import capture_rollout

        # ``steps`` steps of a torch.randint (or sample_actions) policy as one CUDA-graph
        # replay, a trajectory recorded; three calls first (the warm-up calls and the capture).
        policy = (lambda obs: env.sample_actions()) if actions == "sampled" else \
            (lambda obs: action(0))
        rollout = capture_rollout(env, policy, steps)
        state = {"obs": env.reset(seed=0)[0]}

        def run():
            state["obs"] = rollout(state["obs"]).next_obs

        warm_up, per_run = 3, steps
    else:
        def run():
            for k in range(steps):
                env.step(action(k))

        warm_up, per_run = 1, steps
    for _ in range(warm_up):
        run()
    seconds, host = zip(*(time_run(run) for _ in range(repeats)), strict=True)
    # The kernels alone: the backend's step, no action conversion or error-flag copy.
    backend, _ = time_run(lambda: [env.backend.step(pool[k % 8], env._outputs)
                                   for k in range(steps)])
    env.check_errors()
    return (env, statistics.median(seconds) / per_run, statistics.median(host) / per_run,
            backend / steps)


def time_run(run) -> tuple[float, float]:
    """Device seconds (CUDA events) and host seconds of one ``run()``."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    began = time.perf_counter()
    run()
    host = time.perf_counter() - began
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000, host


TARGET_RATIO = 20.0
"""Our Tag's target: at least this many times WarpDrive's rate, in every case."""


def ratio_rows(rows: list[dict], peers: list[dict]) -> list[dict]:
    """One row per (case, our actions) that WarpDrive has too: our env-steps/s, WarpDrive's in
    its trainer's form (sampler + step) and its step alone, and ours over each."""
    out = []
    for peer in peers:
        for row in rows:
            if row["case"] != peer["case"]:
                continue
            trainer = peer["trainer"]["env_steps_per_s"]
            step = peer["step_only"]["env_steps_per_s"]
            out.append(dict(case=row["case"], actions=row["actions"],
                            ours=row["env_steps_per_s"], warpdrive=trainer,
                            ratio=row["env_steps_per_s"] / trainer, warpdrive_step=step,
                            ratio_step=row["env_steps_per_s"] / step))
    return out


def format_ratios(ratios: list[dict]) -> list[str]:
    """The ``--vs warpdrive`` table: env-steps/s and ratios, one line per row."""
    lines = [f"{'case':14s} {'ours (actions)':>24s} {'WarpDrive sampler+step':>22s} "
             f"{'ratio':>8s} {'WarpDrive step':>15s} {'ratio':>8s}"]
    for r in ratios:
        ours = f"{r['ours']:,.0f} ({r['actions']})"
        lines.append(f"{r['case']:14s} {ours:>24s} {r['warpdrive']:22,.0f} "
                     f"{r['ratio']:7.1f}x {r['warpdrive_step']:15,.0f} {r['ratio_step']:7.1f}x")
    return lines


def plot_ratios(ratios: list[dict], path: str) -> None:
    """Bars of our rate over WarpDrive's per case (log scale), both WarpDrive forms and each
    of our action sources, with the target line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(r["case"] for r in ratios))
    series = [(actions, key, label) for actions in dict.fromkeys(r["actions"] for r in ratios)
              for key, label in (("ratio", "WarpDrive sampler+step"),
                                 ("ratio_step", "WarpDrive step alone"))]
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (actions, key, label) in enumerate(series):
        values = {r["case"]: r[key] for r in ratios if r["actions"] == actions}
        xs = [c + (i - (len(series) - 1) / 2) * width for c in range(len(cases))]
        ax.bar(xs, [values.get(case, 0) for case in cases], width,
               label=f"ours ({actions} actions) / {label}")
    ax.axhline(TARGET_RATIO, color="black", linestyle="--", linewidth=1,
               label=f"target {TARGET_RATIO:g}x")
    ax.set_xticks(range(len(cases)), [c.removeprefix("tag ") for c in cases])
    ax.set_yscale("log")
    ax.set_xlabel("games x agents")
    ax.set_ylabel("our env-steps/s over WarpDrive's")
    ax.set_title("Tag: ours over WarpDrive 2.7.1, one process")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def time_warpdrive(cases, steps: int, repeats: int) -> list[dict]:
    """WarpDrive on the continuous cases it can run (one block a game), one record each."""
    from gpu_vecenv.bench import load_peer
    from gpu_vecenv.envs.tag import TagParams

    peer = load_peer("warpdrive_peer")
    problem = ("its timing code, benchmarks/warpdrive_peer.py, comes with a source checkout"
               if peer is None else peer.warpdrive_problem())
    if problem:
        print(f"WarpDrive not timed: {problem}")
        return []
    runnable = []
    for label, cls, games, params in cases:
        agents = params.get("num_taggers", 0) + params.get("num_runners", 0)
        if cls is not make_tag:
            continue
        if agents > peer.MAX_THREADS_PER_BLOCK:
            print(f"{label}: WarpDrive not timed (more than {peer.MAX_THREADS_PER_BLOCK} "
                  "agents a game needs its multi-block mode)")
            continue
        runnable.append((label, games, TagParams.warpdrive_training(**tag_params(params))))
    heap = peer.curand_heap_bytes(sum(games * p.num_agents for _, games, p in runnable))
    peers = []
    for label, games, params in runnable:
        try:
            record = peer.time_tag(games, params, steps, repeats, heap)
        except Exception as exc:  # noqa: BLE001 (PyCUDA's and nvcc's own errors)
            print(f"{label}: WarpDrive failed: {str(exc).splitlines()[0] if str(exc) else exc!r}")
            continue
        peers.append(dict(record, case=label))
        print(f"{label}: WarpDrive {record['trainer']['env_steps_per_s']:,.0f} env-steps/s "
              f"(sampler+step), {record['step_only']['env_steps_per_s']:,.0f} (step alone), "
              f"{record['steps']} steps x {repeats}, {record['registers']} registers"
              + (f" (cap {record['register_cap']})" if record["register_cap"] else ""))
    return peers


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs, median (default 5)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--case", default=None,
                        help="run only these cases, comma-separated, e.g. 'tag 1x5,grid 1x5'")
    parser.add_argument("--actions", choices=[*ACTIONS, "both", "all"], default="pool",
                        help="our actions: a pool drawn beforehand (default), a torch.randint "
                             "every step, that loop captured as one CUDA graph (captured), "
                             "the captured loop with env.sample_actions() (sampled), "
                             "pool and per-step (both) or all four")
    parser.add_argument("--vs", choices=["warpdrive"], default=None,
                        help="also time WarpDrive's Tag on the continuous cases, this process")
    parser.add_argument("--plot", default=None, metavar="PATH",
                        help="with --vs warpdrive: a PNG of our rate over WarpDrive's per case")
    parser.add_argument("--cprofile", action="store_true", help="cProfile the step() calls")
    args = parser.parse_args(argv)
    if args.plot and not args.vs:
        parser.error("--plot draws the --vs warpdrive ratios: give --vs warpdrive")
    if args.case:
        wanted = args.case.split(",")
        unknown = set(wanted) - {c[0] for c in CASES}
        if unknown:
            parser.error(f"unknown cases {sorted(unknown)}; known: {[c[0] for c in CASES]}")
    args.action_sources = {"both": ["pool", "per-step"], "all": list(ACTIONS)}.get(
        args.actions, [args.actions])
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = torch.device(args.device)
    if args.case:
        wanted = args.case.split(",")
        CASES[:] = [c for c in CASES if c[0] in wanted]
    if args.cprofile:
        import cProfile
        import pstats

        for label, cls, games, params in CASES:
            profile = cProfile.Profile()
            profile.enable()
            time_case(cls, games, params, device, args.backend, args.steps, repeats=1)
            profile.disable()
            print(label)
            pstats.Stats(profile).sort_stats("tottime").print_stats(12)
        return
    bandwidth = copy_bandwidth(device)
    print(f"device copy bandwidth: {bandwidth / 1e12:.2f} TB/s")
    print(f"{'case':14s} {'actions':>8s} {'env-steps/s':>14s} {'agent-steps/s':>15s} "
          f"{'us/step':>9s} {'host us':>8s} {'kernels us':>10s} {'MB/step':>9s} "
          f"{'% of copy bw':>12s}")
    rows = []
    for label, cls, games, params in CASES:
        for actions in args.action_sources:
            env, seconds, host, backend = time_case(cls, games, params, device, args.backend,
                                                    args.steps, args.repeats, actions)
            moved = bytes_per_step(env)
            row = dict(case=label, actions=actions, games=games, agents=env.num_agents,
                       env_steps_per_s=games / seconds, agent_steps_per_s=env.num_envs / seconds,
                       us_per_step=seconds * 1e6, host_us_per_step=host * 1e6,
                       backend_us_per_step=backend * 1e6, bytes_per_step=moved,
                       fraction_of_copy_bw=moved / seconds / bandwidth)
            rows.append(row)
            print(f"{label:14s} {actions:>8s} {row['env_steps_per_s']:14,.0f} "
                  f"{row['agent_steps_per_s']:15,.0f} {row['us_per_step']:9.1f} "
                  f"{host * 1e6:8.1f} {backend * 1e6:10.1f} {moved / 1e6:9.2f} "
                  f"{100 * row['fraction_of_copy_bw']:11.1f}%")
            env.close()
    result = dict(copy_bandwidth=bandwidth, rows=rows)
    if args.vs == "warpdrive":
        # after all of ours: WarpDrive's heap and modules then weigh on none of our figures
        peers = time_warpdrive(CASES, args.steps, args.repeats)
        ratios = ratio_rows(rows, peers)
        print("\n".join(format_ratios(ratios)))
        result.update(warpdrive=peers, ratios=ratios)
        if args.plot and ratios:
            plot_ratios(ratios, args.plot)
            print(f"wrote {args.plot}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
