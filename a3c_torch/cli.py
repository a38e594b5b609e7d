"""The two commands: `python train.py` / `python evaluate.py` in a clone, `a3c-train` /
`a3c-evaluate` after `pip install .` (pyproject.toml's [project.scripts]). Both run the functions here.

Nothing heavy is imported at the top: OMP_NUM_THREADS must be set before torch is imported.
"""

import os

# One OpenMP thread per process, set before torch is imported: N workers on N cores must not each
# spin up N threads (spawned children inherit it), and evaluation must not take every core from a
# training run on the same machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys  # noqa: E402


def train(argv=None) -> int:
    """Train an LSTM actor-critic with A3C; `--help` lists every flag."""
    from a3c_torch.console import protect_console

    protect_console()  # training goes on when its console goes away (`| head`, a closed terminal)
    from a3c_torch.config import parse_args, validate
    from a3c_torch.errors import UsageError, program_name
    from a3c_torch.preflight import check_num_steps
    from a3c_torch.storage.run_name import check_exp_name

    cfg, explicit = parse_args(argv)
    try:
        validate(cfg)  # flag mistakes are reported before the slow imports (torch, gymnasium, tensorboard)
        check_exp_name(cfg)
        check_num_steps(cfg)
        from a3c_torch.trainer import train as run_training

        return run_training(cfg, explicit)
    except UsageError as exc:
        print(f"{program_name('train.py')}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C while starting up, before the trainer owns the signals
        print(f"{program_name('train.py')}: interrupted before training started", file=sys.stderr)
        return 130


def evaluate(argv=None) -> int:
    """Play full games with a trained checkpoint and print the scores; `--help` lists every flag."""
    from a3c_torch.console import protect_console

    protect_console("evaluation")  # `evaluate.py | head -1`: no BrokenPipeError traceback; --json and videos are still written
    from a3c_torch.errors import UsageError, program_name
    from a3c_torch.evaluation.flags import parse

    try:
        args, play = parse(sys.argv[1:] if argv is None else list(argv))  # --help and flag mistakes: before torch loads
        from a3c_torch.evaluation.cli import run as run_evaluation

        return run_evaluation(args, play)
    except UsageError as exc:
        print(f"{program_name('evaluate.py')}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{program_name('evaluate.py')}: interrupted", file=sys.stderr)
        return 130
