"""Train an LSTM actor-critic with A3C. `python train.py --help` lists every flag."""

import os

# One OpenMP thread per process, set before torch is imported: N workers on N cores must not
# each spin up N threads (and fork/spawn children inherit this).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys  # noqa: E402


def main(argv=None) -> int:
    from a3c_torch.console import protect_console

    protect_console()  # training goes on when its console goes away (`| head`, a closed terminal)
    from a3c_torch.config import parse_args, validate
    from a3c_torch.errors import UsageError
    from a3c_torch.preflight import check_num_steps
    from a3c_torch.run_name import check_exp_name

    cfg, explicit = parse_args(argv)
    try:
        validate(cfg)  # flag mistakes are reported before the slow imports (torch, gymnasium, tensorboard)
        check_exp_name(cfg)
        check_num_steps(cfg)
        from a3c_torch.trainer import train

        return train(cfg, explicit)
    except UsageError as exc:
        print(f"train.py: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C while starting up, before the trainer owns the signals
        print("train.py: interrupted before training started", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
