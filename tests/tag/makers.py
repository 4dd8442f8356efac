"""The shipped games as the tests make them, through ``make_vec`` like every env:
``make_tag(G, **kwargs)`` is ``make_vec("GPUTag-v0", G, **kwargs)``, a
``MultiAgentVectorEnv`` of ``G`` games. And ``PREDATOR_PREY``: gridworld Tag under other
role names, for what must work with any multi-agent env's roles."""

from dataclasses import replace
from functools import partial

from gpu_vecenv.entry_points import make_vec
from gpu_vecenv.envs import tag_grid

make_tag = partial(make_vec, "GPUTag-v0")
make_tag_grid = partial(make_vec, "GPUTagGrid-v0")


def predator_prey_roles(params: tag_grid.TagGridParams) -> tuple[str, ...]:
    """Gridworld Tag's agents: the taggers are predators, the runner (last) the prey."""
    return ("predator",) * params.num_taggers + ("prey",)


PREDATOR_PREY = replace(tag_grid.DEFINITION, name="predator_prey", roles=predator_prey_roles,
                        role_names=("predator", "prey"), kernel_binding=None)
