"""cuda_src/common/rng.cuh, compiled for the host, against gpu_vecenv/seeding.py: bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpu_vecenv import seeding

from . import harness


@pytest.mark.parametrize("stream", [seeding.STREAM_RESET, 1, 0xFFFFFFFF])
def test_philox_words_and_uniforms_match_seeding(host_harness, tmp_path, stream):
    rng = np.random.default_rng(1234 + stream % 97)
    n = 4096
    seeds = rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64)
    seeds[:4] = [0, 1, -1, 2**63 - 1]  # edge keys: 0, 1, 2**64-1, 2**63-1
    index = rng.integers(0, 2**31, size=n, dtype=np.int64)
    index[:4] = [0, 1, 2**32 - 1, 2**32 + 5]  # the counter word is index mod 2**32
    counter = rng.integers(0, 2**40, size=n, dtype=np.int64)
    counter[:4] = [0, 1, 2**32 - 1, 2**32]
    words, uniforms = harness.run_rng(host_harness, tmp_path, seeds, index, counter, stream)

    t = torch.from_numpy
    expected = seeding.random_words(t(seeds), t(index), t(counter), 8, stream)
    np.testing.assert_array_equal(words.astype(np.int64), expected.numpy())
    expected_u = seeding.random_uniform(t(seeds), t(index), t(counter), 8, stream)
    np.testing.assert_array_equal(uniforms.view(np.uint32), expected_u.numpy().view(np.uint32))


def test_known_answer_random123(host_harness, tmp_path):
    """Random123's published philox4x32-10 answer for counter 0 and key 0 (kat_vectors)."""
    words, _ = harness.run_rng(host_harness, tmp_path, [0], [0], [0], 0)
    assert [hex(w) for w in words[0, :4]] == ["0x6627e8d5", "0xe169c58d", "0xbc57ac4c",
                                              "0x9b00dbd8"]
