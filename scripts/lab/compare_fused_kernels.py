"""The fused PPO kernels of this tree against those of another commit, on the GPU: every
output of every FusedPPO method (minibatch gradient, statistics, clipping, act, values,
GAE), compared bit for bit, for each network of tests/train/test_fused_gpu.py at both tiles.

Made for refactors of ``cuda_src/ppo_mlp.cu`` / ``gpu_vecenv/train/ppo_mlp_kernels.py``
(``fused.py`` before its rename) that must not change a bit (they compile with
-fmad=false, so the same float operations in the same order give the same results): the
other commit's two files are taken with ``git show`` and driven through the same inputs.
Exit status 1 if any output differs.

    python scripts/lab/compare_fused_kernels.py c792bfe
    python scripts/lab/compare_fused_kernels.py .bench-before    # a checkout of that commit
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from gpu_vecenv.backends import compiler
from gpu_vecenv.train import ppo_mlp_kernels as new_fused
from gpu_vecenv.train.config import PPOConfig
from gpu_vecenv.train.distributions import ActionSpec
from gpu_vecenv.train.networks import ActorCritic

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.train.test_fused_gpu import CASES, _rollout  # noqa: E402

_load = compiler.load_module


def _old_files(commit: str, folder: Path):
    """The other commit's ppo_mlp_kernels.py (fused.py before the rename; as a module) and
    the path of its ppo_mlp.cu."""
    for paths, name in ((("cuda_src/ppo_mlp.cu",), "ppo_mlp.cu"),
                        (("gpu_vecenv/train/ppo_mlp_kernels.py", "gpu_vecenv/train/fused.py"),
                         "fused_old.py")):
        (folder / name).write_text(_first_existing(commit, paths))
    spec = importlib.util.spec_from_file_location("fused_old", folder / "fused_old.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, folder / "ppo_mlp.cu"

def _first_existing(commit: str, paths: tuple[str, ...]) -> str:
    """The text of the first of ``paths`` that ``commit`` (or a checkout of it) holds."""
    for path in paths:
        if Path(commit).is_dir():  # a checkout of it (e.g. a `git archive`), where no .git is
            if (Path(commit) / path).is_file():
                return (Path(commit) / path).read_text()
            continue
        shown = subprocess.run(["git", "show", f"{commit}:{path}"], capture_output=True,
                               text=True, check=False)
        if shown.returncode == 0:
            return shown.stdout
    raise FileNotFoundError(f"{commit} holds none of {', '.join(paths)}")


def bits(t):
    return t.contiguous().view(torch.int32) if t.dtype == torch.float32 else t


def same(a, b):
    return a.shape == b.shape and torch.equal(bits(a), bits(b))


def run(module, case, tile, source=None):
    """Every output of ``module.FusedPPO`` (kernels from ``source``, else this tree's)."""
    space, obs_dim, hidden, activation, normalize, ppo = CASES[case]
    spec = ActionSpec.from_space(space)
    torch.manual_seed(0)
    model = ActorCritic(obs_dim, spec, hidden, activation, -0.5, normalize).cuda()
    if normalize:
        model.normalizer.mean.normal_()
        model.normalizer.var.uniform_(0.3, 3.0)
    reference = copy.deepcopy(model)
    if source is not None:
        compiler.load_module = (lambda name, index, path=None, extra_flags=():
                                _load(name, index, source, extra_flags))
    try:
        f = module.FusedPPO(model, spec, obs_dim, hidden, activation, normalize, tile)
    finally:
        compiler.load_module = _load
    c = PPOConfig(hidden_sizes=hidden, activation=activation, **ppo)
    out = {}
    rows = 4096
    batch = _rollout(spec, reference, rows, obs_dim)
    order = torch.randperm(rows, device="cuda", generator=torch.Generator("cuda").manual_seed(2))
    for start, size in ((20, 250), (0, 4096)):
        adv = torch.zeros(2, device="cuda")
        f.advantage_stats(batch["advantages"], order[start:], size, 1, adv)
        f.totals.zero_()
        f.minibatch_gradient(batch, order, start, size, adv, c.clip_coef, c.ent_coef,
                             c.vf_coef, c.clip_vloss, c.norm_adv)
        out[f"adv{start}"] = adv.clone()
        out[f"grads{start}"] = f.flat_grads.clone()
        out[f"totals{start}"] = f.totals.clone()
        f.clip_gradient(0.05)
        out[f"clipped{start}"] = f.flat_grads.clone()
    n = 1000
    g = torch.Generator(device="cuda").manual_seed(3)
    obs = torch.randn(n, obs_dim, device="cuda", generator=g) * 2
    box = spec.kind == "box"
    noise = (torch.randn if box else torch.rand)(n, spec.head_size, device="cuda", generator=g)
    obs_out = torch.zeros_like(obs)
    actions = torch.zeros((n, *spec.action_shape), dtype=spec.dtype, device="cuda")
    env_actions = torch.zeros_like(actions) if box else actions
    log_probs = torch.zeros(n, device="cuda")
    f.act(obs, noise, obs_out, actions, log_probs, env_actions)
    out.update(obs_out=obs_out, actions=actions, env_actions=env_actions, log_probs=log_probs)
    values = torch.zeros(777, device="cuda")
    f.values(obs[:777].contiguous(), values)
    out["values"] = values
    t, m = 37, 1000
    r, v, nv = (torch.randn(t, m, device="cuda", generator=g) for _ in range(3))
    term = torch.rand(t, m, device="cuda", generator=g) < 0.05
    done = term | (torch.rand(t, m, device="cuda", generator=g) < 0.05)
    a, ret = torch.empty_like(r), torch.empty_like(r)
    f.gae(r, v, nv, term, done, 0.98, 0.9, a, ret)
    out.update(gae_adv=a, gae_ret=ret)
    torch.cuda.synchronize()
    return out, f.tile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commit", help="the commit to compare with (git show COMMIT:path), "
                        "or a folder holding its tree")
    args = parser.parse_args()
    different = 0
    with tempfile.TemporaryDirectory() as folder:
        old_fused, old_source = _old_files(args.commit, Path(folder))
        for case in CASES:
            for tile in (None, 32):
                new, new_tile = run(new_fused, case, tile)
                old, old_tile = run(old_fused, case, tile, old_source)
                diffs = [k for k in new if not same(new[k], old[k])]
                different += len(diffs)
                print(f"{case:28s} tile {new_tile}/{old_tile}: {len(new)} outputs, "
                      f"differing: {diffs or 'none'}")
    print("all bit-identical" if different == 0 else f"{different} outputs differ")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
