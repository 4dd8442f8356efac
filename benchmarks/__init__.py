"""Other libraries timed beside ours, for the benchmarks in scripts/ and ``gpu-vecenv bench
--vs gymnax``: gymnax's jitted scan (:mod:`benchmarks.gymnax_peer`), WarpDrive's Tag
(:mod:`benchmarks.warpdrive_peer`) and PureJaxRL's PPO, vendored (Apache-2.0) and patched for
gymnax 1.0 (:mod:`benchmarks.purejaxrl_ppo`).

Benchmark tools, not part of the installed package: a source checkout holds them, and
:func:`gpu_vecenv.bench.load_peer` loads them from here. Each imports its library (JAX and
gymnax, with flax and optax for PureJaxRL; WarpDrive, its ``gym`` and PyCUDA) only when asked
to time it.
"""
