"""``cuda_src/sample_actions.cu``'s per-slot code, compiled for the host, against
:func:`gpu_vecenv.action_sampling.sample_reference`: bit for bit."""

from __future__ import annotations

import numpy as np
import torch

from gpu_vecenv.action_sampling import sample_reference

from . import harness


def _slots(rng, n):
    seed = rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64)
    seed[:3] = [0, -1, 2**63 - 1]
    counter = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    counter[:3] = [0, 2**31, 2**32 - 1]
    return seed, counter


def _reference(kind, low, high, seed, counter):
    return sample_reference(kind, torch.from_numpy(low), torch.from_numpy(high),
                            torch.from_numpy(seed), torch.arange(len(seed)),
                            torch.from_numpy(counter.astype(np.int64))).numpy()


def test_discrete_and_multidiscrete_match_the_definition(host_harness, tmp_path):
    rng = np.random.default_rng(11)
    seed, counter = _slots(rng, 2048)
    for start, count in (([0], [2]), ([-1], [3]), ([0, 0], [11, 11]),
                         ([5, -7, 0, 1, 2], [2**31, 1, 7, 1000, 3])):
        start, count = np.array(start, np.int64), np.array(count, np.int64)
        got = harness.run_sample(host_harness, tmp_path, "discrete", seed, counter, start, count)
        np.testing.assert_array_equal(got, _reference("discrete", start, count, seed, counter))
        assert ((got >= start) & (got < start + count)).all()


def test_box_matches_the_definition(host_harness, tmp_path):
    rng = np.random.default_rng(12)
    seed, counter = _slots(rng, 2048)
    for low, high in (([-2.0], [2.0]), ([-1.0, 0.1, -3.0, 0.0, 1e-3, -1e30],
                                        [1.0, 0.7, -2.5, 1e-7, 2e-3, 1e30])):
        low, high = np.array(low, np.float32), np.array(high, np.float32)
        got = harness.run_sample(host_harness, tmp_path, "box", seed, counter, low, high)
        np.testing.assert_array_equal(got.view(np.uint32),
                                      _reference("box", low, high, seed, counter).view(np.uint32))
