"""The CUDA backend's own behaviour: determinism, invalid actions, backend selection,
streams, the kernel cache, sizes that are not a multiple of the block."""

from __future__ import annotations

import pytest
import torch
from gymnasium.vector import AutoresetMode

import gpu_vecenv
from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.backends import resolve_backend
from gpu_vecenv.entry_points import make_vec

from .classic import CLASSIC_IDS, make_pair, random_actions

pytestmark = pytest.mark.gpu


def _trajectory(env_id: str, seed: int, steps: int = 1000, n: int = 4096):
    env = make_vec(env_id, n, device="cuda", backend="cuda")
    gen = torch.Generator(device="cuda").manual_seed(1)
    obs, _ = env.reset(seed=seed)
    frames = [obs]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(random_actions(env, gen))
        frames.append(torch.cat([obs, reward[:, None], terminated[:, None],
                                 truncated[:, None]], dim=1))
    return frames


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_same_seed_is_bit_identical_and_other_seed_differs(env_id):
    a, b = _trajectory(env_id, 7), _trajectory(env_id, 7)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    c = _trajectory(env_id, 8, steps=1)
    assert not torch.equal(a[0], c[0])


def test_auto_picks_cuda_and_default_backend_is_cuda():
    assert resolve_backend("auto", torch.device("cuda", 0)) == "cuda"
    env = gpu_vecenv.make_vec("GPUCartPole-v1", 8)
    assert env.backend_name == "cuda" and env.device.type == "cuda"


def test_backend_selection_errors(monkeypatch):
    with pytest.raises(RuntimeError, match="not a CUDA device"):
        make_vec("GPUCartPole-v1", 4, device="cpu", backend="cuda")
    from gpu_vecenv.backends import compiler, nvrtc

    monkeypatch.setattr(nvrtc, "find_nvrtc", lambda: None)
    monkeypatch.setattr(compiler, "find_nvcc", lambda: None)
    with pytest.raises(RuntimeError, match="no CUDA compiler"):
        make_vec("GPUCartPole-v1", 4, device="cuda", backend="cuda")
    monkeypatch.setenv("GPU_VECENV_COMPILER", "nvcc")
    with pytest.raises(RuntimeError, match="nvcc"):
        make_vec("GPUCartPole-v1", 4, device="cuda", backend="cuda")


def test_auto_falls_back_to_torch_naming_the_cause(monkeypatch):
    """Without a compiler, ``auto`` gives the torch backend and a notice saying why and
    what to install; a kernel that fails to compile does the same, with its log."""
    from gpu_vecenv.backends import compiler, nvrtc

    monkeypatch.setattr(nvrtc, "find_nvrtc", lambda: None)
    monkeypatch.setattr(compiler, "find_nvcc", lambda: None)
    with pytest.warns(UserWarning, match="torch backend.*NVRTC.*not found.*pip install"):
        env = make_vec("GPUMountainCar-v0", 4, device="cuda")
    assert env.backend_name == "torch"
    monkeypatch.undo()

    def rejected(*args, **kwargs):
        raise compiler.CudaCompileError("NVRTC 13.0 failed to compile cartpole.cu:\nline 1\n"
                                        "line 2\nline 3")

    monkeypatch.setattr(compiler, "compile_kernel", rejected)
    monkeypatch.setattr(compiler, "_modules", {})
    with pytest.warns(UserWarning, match="torch backend.*failed to compile cartpole.cu"):
        env = make_vec("GPUCartPole-v1", 4, device="cuda")
    assert env.backend_name == "torch"
    with pytest.raises(compiler.CudaCompileError, match="line 3"):
        make_vec("GPUCartPole-v1", 4, device="cuda", backend="cuda")


def test_kernels_compile_with_each_available_compiler_and_agree(tmp_path, monkeypatch):
    """NVRTC's and nvcc's builds of the same kernel give the same bits (nvcc where a
    toolkit is installed; NVRTC always: torch's CUDA wheels bring it)."""
    from gpu_vecenv.backends import compiler

    monkeypatch.setenv("GPU_VECENV_CACHE_DIR", str(tmp_path))
    kinds = ["nvrtc"] + (["nvcc"] if compiler.find_nvcc() else [])
    runs = []
    for kind in kinds:
        monkeypatch.setenv("GPU_VECENV_COMPILER", kind)
        env = make_vec("GPUPendulum-v1", 4096, device="cuda", backend="cuda")
        gen = torch.Generator(device="cuda").manual_seed(0)
        obs, _ = env.reset(seed=5)
        frames = [obs]
        for _ in range(300):
            frames.append(env.step(random_actions(env, gen))[0])
        runs.append(torch.stack(frames))
    assert {p.name.split("-")[2] for p in tmp_path.glob("pendulum-*")} == set(kinds)
    assert all(torch.equal(runs[0], r) for r in runs[1:])


def test_ptx_from_nvrtc_loads_through_the_driver_jit(tmp_path, monkeypatch):
    """Where NVRTC is older than the GPU it emits PTX; the driver compiles it at load.
    Forced here on a GPU NVRTC knows: same bits as the cubin."""
    from gpu_vecenv.backends import compiler

    monkeypatch.setenv("GPU_VECENV_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("GPU_VECENV_COMPILER", "nvrtc")
    runs = []
    for ptx in (False, True):
        monkeypatch.setattr(compiler, "_modules", {})
        monkeypatch.setattr(compiler, "target_for",
                            lambda capability, c, ptx=ptx: compiler.Target(
                                capability[0] * 10 + capability[1], ptx=ptx))
        env = make_vec("GPUAcrobot-v1", 2048, device="cuda", backend="cuda")
        gen = torch.Generator(device="cuda").manual_seed(3)
        obs, _ = env.reset(seed=4)
        runs.append(torch.stack([obs] + [env.step(random_actions(env, gen))[0]
                                         for _ in range(200)]))
    assert len(list(tmp_path.glob("acrobot-compute_*.ptx"))) == 1
    assert torch.equal(runs[0], runs[1])


def test_a_thread_new_to_cuda_steps_the_env():
    """The driver launches into the thread's current context; a thread that never used
    CUDA has none until the launch binds torch's (the primary context)."""
    import threading

    env = make_vec("GPUCartPole-v1", 1000, device="cuda", backend="cuda")
    ref = make_vec("GPUCartPole-v1", 1000, device="cuda", backend="torch")
    action = torch.ones(1000, dtype=torch.int64, device="cuda")
    results, errors = [], []

    def run():
        try:
            env.reset(seed=1)
            results.append(env.step(action)[0].clone())
        except Exception as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert not errors, errors
    ref.reset(seed=1)
    assert torch.equal(results[0], ref.step(action)[0])


def test_pycuda_code_and_the_kernels_share_the_primary_context():
    """PyCUDA is no longer needed, and still works beside the kernels: its
    ``autoprimaryctx`` uses the same context, so arrays pass both ways."""
    pytest.importorskip("pycuda")
    import numpy as np
    import pycuda.autoprimaryctx  # noqa: F401
    import pycuda.gpuarray as gpuarray

    env = make_vec("GPUCartPole-v1", 64, device="cuda", backend="cuda")
    obs, _ = env.reset(seed=2)
    torch.cuda.synchronize()
    view = gpuarray.GPUArray(obs.shape, np.float32, gpudata=obs.data_ptr())
    np.testing.assert_array_equal(view.get(), obs.cpu().numpy())
    obs, *_ = env.step(torch.zeros(64, dtype=torch.int64, device="cuda"))
    assert torch.isfinite(obs).all()


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_invalid_action_strict_raises_and_changes_nothing(env_id):
    env = make_vec(env_id, 1000, device="cuda", backend="cuda", strict=True)
    env.reset(seed=3)
    gen = torch.Generator(device="cuda").manual_seed(2)
    env.step(random_actions(env, gen))
    before = env.get_state()
    bad = random_actions(env, gen)
    bad[417] = -1 if env.actions.kind == "discrete" else float("nan")
    with pytest.raises(InvalidActionError, match="417"):
        env.step(bad)
    after = env.get_state()
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_invalid_action_deferred_leaves_env_intact_and_is_reported(env_id):
    cuda_env, ref = make_pair(env_id, 1000)
    for env in (cuda_env, ref):
        env.reset(seed=3)
    gen = torch.Generator(device="cuda").manual_seed(2)
    before = cuda_env.get_state()
    action = random_actions(cuda_env, gen)
    action[417] = 5 if cuda_env.actions.kind == "discrete" else float("inf")
    cuda_env.step(action)  # no sync, no raise here
    ref.step(action)
    after = cuda_env.get_state()
    for key in before:
        assert torch.equal(after[key][417], before[key][417]), key
        assert torch.equal(after[key], ref.get_state()[key]), key
    assert cuda_env.buffers.invalid_action.nonzero().flatten().tolist() == [417]
    with pytest.raises(InvalidActionError, match="417"):
        cuda_env.check_errors()
    cuda_env.check_errors()  # reported once


def test_side_stream_orders_like_the_default_stream():
    """On a non-default torch stream the kernel goes onto that stream (driver API): it
    must read the action before a later torch op on that stream overwrites it, and the
    obs must be complete before a later op reads it. Compared with the same env stepped
    on the default stream (same kernel, so bit-identical if ordered)."""
    n = 1_000_003
    on_side = make_vec("GPUCartPole-v1", n, device="cuda", backend="cuda", copy=False)
    on_default = make_vec("GPUCartPole-v1", n, device="cuda", backend="cuda", copy=False)
    gen = torch.Generator(device="cuda").manual_seed(0)
    actions = [random_actions(on_default, gen) for _ in range(20)]
    on_default.reset(seed=1)
    expected = [on_default.step(a)[0].clone() for a in actions]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    got = []
    with torch.cuda.stream(side):
        on_side.reset(seed=1)
        for a in actions:
            scratch = a.clone()
            obs = on_side.step(scratch)[0]
            scratch.fill_(7)  # invalid: if the kernel read it after this, envs would not step
            got.append(obs.clone())
    side.synchronize()
    assert all(torch.equal(x, y) for x, y in zip(got, expected, strict=True))
    assert int(on_side.buffers.error_count) == 0


@pytest.mark.parametrize("n", [1, 255, 257, 1000, 65_537])
def test_odd_sizes(n):
    cuda_env, ref = make_pair("GPUAcrobot-v1", n, AutoresetMode.SAME_STEP)
    gen = torch.Generator(device="cuda").manual_seed(n)
    a, _ = cuda_env.reset(seed=9)
    b, _ = ref.reset(seed=9)
    assert torch.equal(a, b)
    for _ in range(20):
        action = random_actions(ref, gen)
        assert torch.equal(cuda_env.step(action)[0], ref.step(action)[0])


def test_binding_that_disagrees_with_the_kernel_file_fails_at_load():
    """The constants are checked against the layout cartpole.cu exports: two fields packed
    in swapped order would otherwise run with gravity and masspole exchanged."""
    import dataclasses

    from gpu_vecenv.envs import cartpole
    from gpu_vecenv.kernel_binding import KernelBinding, KernelLayoutError
    from gpu_vecenv.vector_env import GpuVectorEnv

    def swapped(params):
        fields = cartpole.kernel_consts(params)
        return [fields[1], fields[0], *fields[2:]]

    definition = dataclasses.replace(cartpole.DEFINITION,
                                     kernel_binding=KernelBinding("cartpole", swapped))
    with pytest.raises(KernelLayoutError, match=r"cartpole: .* differ at field 0: the kernel "
                                                r"file declares 'float gravity', the binding "
                                                r"packs 'float masspole'"):
        GpuVectorEnv(definition, 8, device="cuda", backend="cuda")
    GpuVectorEnv(cartpole.DEFINITION, 8, device="cuda", backend="cuda").close()
