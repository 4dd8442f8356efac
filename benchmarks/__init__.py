"""Other libraries timed beside ours, for the benchmarks in scripts/ and ``gpu-vecenv bench
--vs gymnax``: gymnax's jitted scan (:mod:`benchmarks.gymnax_peer`) and WarpDrive's Tag
(:mod:`benchmarks.warpdrive_peer`).

Benchmark tools, not part of the installed package: a source checkout holds them, and
:func:`gpu_vecenv.bench.load_peer` loads them from here. Each imports its library (JAX and
gymnax; WarpDrive, its ``gym`` and PyCUDA) only when asked to time it.
"""
