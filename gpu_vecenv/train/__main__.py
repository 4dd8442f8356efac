"""``python -m gpu_vecenv.train ARGS`` = ``gpu-vecenv train ARGS``; what ``torchrun`` starts
on every rank of a data-parallel run::

    torchrun --nproc-per-node 4 -m gpu_vecenv.train cartpole_ppo
"""

import sys

from gpu_vecenv.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
