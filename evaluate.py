"""Play full games with a trained checkpoint and print the scores. `python evaluate.py --help` lists
every flag (installed: `a3c-evaluate`)."""

import sys

from a3c_torch.cli import evaluate as main  # sets OMP_NUM_THREADS=1 before anything imports torch

if __name__ == "__main__":
    sys.exit(main())
