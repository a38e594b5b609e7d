"""Train an LSTM actor-critic with A3C. `python train.py --help` lists every flag."""

import os

# One OpenMP thread per process, set before torch is imported: N workers on N cores must not
# each spin up N threads (and fork/spawn children inherit this).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys  # noqa: E402


def main(argv=None) -> int:
    from a3c_torch.config import parse_args
    from a3c_torch.errors import UsageError
    from a3c_torch.trainer import train

    cfg, explicit = parse_args(argv)
    try:
        return train(cfg, explicit)
    except UsageError as exc:
        print(f"train.py: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
