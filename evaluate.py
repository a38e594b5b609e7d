"""Play full games with a trained checkpoint and print the scores. `python evaluate.py --help` lists every flag."""

import os

# One OpenMP thread, set before torch is imported: evaluation plays one game at a time, and it
# must not take every core from a training run on the same machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys  # noqa: E402


def main(argv=None) -> int:
    from a3c_torch.console import protect_console

    protect_console("evaluation")  # `evaluate.py | head -1`: no BrokenPipeError traceback; --json and videos are still written
    from a3c_torch.errors import UsageError
    from a3c_torch.evaluation import main as evaluate

    try:
        return evaluate(argv)
    except UsageError as exc:
        print(f"evaluate.py: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evaluate.py: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
