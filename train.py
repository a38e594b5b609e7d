"""Train an LSTM actor-critic with A3C. `python train.py --help` lists every flag (installed: `a3c-train`)."""

import sys

from a3c_torch.cli import train as main  # sets OMP_NUM_THREADS=1 before anything imports torch

if __name__ == "__main__":
    sys.exit(main())
