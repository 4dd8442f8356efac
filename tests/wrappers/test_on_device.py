"""Our wrappers never read a tensor value back to the host in ``step()`` or ``reset()``:
run on tensors of torch's ``meta`` device (no data), any such read would raise, as it
would sync on a GPU. Also: they keep their tensors on the env's device."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.wrappers import NormalizeObservation, NormalizeReward, RecordEpisodeStatistics
from tests.wrappers.scripted_env import ScriptedVectorEnv, random_script


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("tag_layout", [False, True])
def test_no_host_reads(mode, tag_layout):
    script = random_script(6, 4)
    if tag_layout:  # 2 games x 2 agents, with Tag's info["active"]
        script.active = np.ones((7, 4), dtype=bool)
    env = ScriptedVectorEnv(script, mode, device="meta", games=(2, 2) if tag_layout else None)
    envs = NormalizeReward(NormalizeObservation(RecordEpisodeStatistics(env), clip=5.0))
    obs, _ = envs.reset(seed=0)
    actions = torch.zeros(4, dtype=torch.int64, device="meta")
    for _ in range(3):
        obs, reward, _, _, info = envs.step(actions)
    slot_mask = torch.ones(4, dtype=torch.bool, device="meta")
    game_mask = torch.ones(2, dtype=torch.bool, device="meta")
    envs.reset(options={"reset_mask": game_mask if tag_layout else slot_mask})
    for _ in range(3):
        obs, reward, _, _, info = envs.step(actions)
    assert obs.device.type == reward.device.type == "meta"
    assert info["episode"]["r"].device.type == info["_episode"].device.type == "meta"
    if mode == AutoresetMode.SAME_STEP:
        assert info["final_obs"].device.type == "meta"
    with pytest.raises(RuntimeError, match="meta"):  # reading the queue is the one sync
        envs.env.env.return_queue  # noqa: B018
