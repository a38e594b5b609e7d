"""`torchrun ... -m a3c_torch.distributed [train.py flags] [distributed flags]`: one node.

With a world of one (`torchrun --nproc-per-node=1` on one machine, no other nodes) this is
`train.py` exactly: no RPC, no ports.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported, as in train.py

import sys  # noqa: E402


def main(argv=None) -> int:
    from a3c_torch.console import protect_console

    protect_console()  # as in train.py: training goes on when its console goes away
    from a3c_torch.config import build_parser, parse_with, validate
    from a3c_torch.distributed.world import DistributedSettings, World, add_arguments
    from a3c_torch.errors import UsageError

    parser = build_parser()
    parser.prog = "python -m a3c_torch.distributed"
    parser.description = "One node of a multi-machine A3C run (start one per machine with torchrun). Every train.py flag applies to each node."
    add_arguments(parser)
    cfg, explicit, extra = parse_with(parser, argv)
    try:
        validate(cfg)
        settings = DistributedSettings(**extra)
        settings.validate()
        world = World.from_environment()
        if world.world_size == 1:
            from a3c_torch.trainer import train

            return train(cfg, explicit)
        from a3c_torch.distributed.node import DistributedNode

        return DistributedNode(cfg, explicit, world, settings).run()
    except UsageError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted before training started", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
