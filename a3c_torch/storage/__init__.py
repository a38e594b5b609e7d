"""What a run keeps on disk: checkpoints and their checks, policy files, the run directory and its
lock, learning curves, and files written whole or not at all. Light on purpose: nothing is
imported here, so `a3c_torch.storage.run_name` stays quick to import (train.py's early checks)."""
