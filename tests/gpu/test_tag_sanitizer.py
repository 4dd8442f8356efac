"""compute-sanitizer memcheck and racecheck over the Tag kernels, at small sizes: one block
per game (all phases in one launch, shared-memory tiles between barriers) and several
blocks per game (one launch per phase), every autoreset mode, both observation modes, one
to three scan helpers per agent, and the packed step (several games of up to 16 agents a
warp: 3 x 11 and 7 x 5); each again with the observation options (own state, egocentric:
the _options kernels, whose scan helpers read their agent's cosine and sine from shared
memory), the packed step forced (GPU_VECENV_TAG_PACKED=32)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = """
import os
import torch
from tests.tag.makers import make_tag, make_tag_grid

def play(env, actions=3, dims=(2,)):
    env.reset(seed=0)
    for _ in range(8):
        env.step(torch.randint(0, actions, (env.num_envs, *dims), device="cuda"))
    return env

def tag(games, mode, **kw):
    return make_tag(games, device="cuda", backend="cuda", autoreset_mode=mode,
                    tagging_distance=0.3, episode_length=6, **kw)

for mode in ("next_step", "same_step", "disabled"):
    # plain kernels, then the _options twins with the packed step forced
    for options, packed, helper_counts in (({}, None, ("1", "2", "3")),
                                           (dict(observe_own_state=True, egocentric=True),
                                            "32", ("1", "3"))):
        if packed:
            os.environ["GPU_VECENV_TAG_PACKED"] = packed
        for games, agents, full in ((3, 11, True), (7, 5, False), (2, 40, False),
                                    (2, 300, False)):
            kw = dict(num_taggers=3, num_runners=agents - 3, use_full_observation=full,
                      **options)
            if not full:
                kw["num_other_agents_observed"] = min(5, agents - 1)
            env = play(tag(games, mode, **kw))
            if not options:
                env.reset(options={"reset_mask": torch.tensor(
                    [True] + [False] * (games - 1), device="cuda")})
        os.environ.pop("GPU_VECENV_TAG_PACKED", None)
        for helpers in helper_counts:  # scan helpers per agent (auto gives 2 x 40 three)
            os.environ["GPU_VECENV_TAG_SCAN_HELPERS"] = helpers
            env = tag(2, mode, num_taggers=3, num_runners=30, use_full_observation=False,
                      num_other_agents_observed=7, **options)
            os.environ.pop("GPU_VECENV_TAG_SCAN_HELPERS")
            play(env)
    for games, agents in ((3, 5), (2, 300)):
        play(make_tag_grid(games, device="cuda", backend="cuda", autoreset_mode=mode,
                           num_taggers=agents - 1, grid_length=3, episode_length=5,
                           random_start=True), actions=5, dims=())
torch.cuda.synchronize()
print("sanitized run done")
"""


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer_clean(tool):
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    command = [sanitizer, "--tool", tool, "--error-exitcode", "3", sys.executable, "-c", SCRIPT]
    if tool == "memcheck":
        command[3:3] = ["--leak-check", "no"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "sanitized run done" in output
    assert "ERROR SUMMARY: 0 errors" in output or "RACECHECK SUMMARY: 0 hazards" in output, \
        output[-2000:]
