"""Test-wide settings: one intra-op thread, as in the real workers.

With torch's default thread count, in-process tests fight the worker processes of other tests
for the 2 cores of a CI machine and run many times slower.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)
