"""Pictures and GIFs of Tag games, under the name the README gives them.

``record_episode`` is :func:`gpu_vecenv.multi_agent.recording.record_episode`; the
pictures are drawn by ``envs/tag.py`` (``draw_tag``) and ``envs/tag_grid.py``
(``draw_grid``): taggers red, runners blue, a tagged runner a grey cross.
"""

from __future__ import annotations

from gpu_vecenv.envs.tag import RUNNER_COLOUR as RUNNER
from gpu_vecenv.envs.tag import TAGGER_COLOUR as TAGGER
from gpu_vecenv.envs.tag import draw_tag
from gpu_vecenv.envs.tag_grid import draw_grid
from gpu_vecenv.gif import save_gif
from gpu_vecenv.multi_agent.recording import record_episode

__all__ = ["RUNNER", "TAGGER", "draw_grid", "draw_tag", "record_episode", "save_gif"]
