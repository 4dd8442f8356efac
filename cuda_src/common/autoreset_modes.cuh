// Values of gymnasium.vector.AutoresetMode as passed to the kernels, single-agent
// (single_agent_kernels.cuh) and multi-agent (games.cuh) alike; AUTORESET_CODES in
// gpu_vecenv/backends/cuda.py holds the same numbers.
#pragma once

#define GV_AUTORESET_NEXT_STEP 0
#define GV_AUTORESET_SAME_STEP 1
#define GV_AUTORESET_DISABLED 2
