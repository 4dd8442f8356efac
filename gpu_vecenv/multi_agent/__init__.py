"""The multi-agent runtime: games of several agents, one agent per vector slot.

It mirrors the single-agent one module for module:

- :mod:`~gpu_vecenv.multi_agent.definition`: the contract an env module fulfils
  (:class:`MultiAgentDefinition`, :class:`GameStep`);
- :mod:`~gpu_vecenv.multi_agent.vector_env`: :class:`MultiAgentVectorEnv`, the Gymnasium view;
- :mod:`~gpu_vecenv.multi_agent.buffers`: its device tensors and what a backend sees;
- :mod:`~gpu_vecenv.multi_agent.torch_backend` and :mod:`~gpu_vecenv.multi_agent.cuda_backend`
  (launched through the env's :mod:`~gpu_vecenv.multi_agent.kernel_binding`, whose layout
  facts :mod:`~gpu_vecenv.multi_agent.kernel_constants` reads from the ``.cu``);
- :mod:`~gpu_vecenv.multi_agent.parallel`: the batched PettingZoo view;
- :mod:`~gpu_vecenv.multi_agent.drawing` and :mod:`~gpu_vecenv.multi_agent.recording`:
  pictures and GIFs.

Nothing here names a game: an env is its module and its kernel file
(``envs/tag_grid.py``, ``cuda_src/tag_grid.cu``; continuous Tag keeps its launch rules in
``envs/tag_launch.py`` beside ``envs/tag.py``).
"""

from gpu_vecenv.deferred_errors import ERROR_FLAG_INTERVAL
from gpu_vecenv.multi_agent.definition import GameStep, MultiAgentDefinition
from gpu_vecenv.multi_agent.vector_env import MultiAgentVectorEnv

__all__ = ["ERROR_FLAG_INTERVAL", "GameStep", "MultiAgentDefinition", "MultiAgentVectorEnv"]
