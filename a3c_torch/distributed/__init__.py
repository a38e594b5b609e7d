"""Multi-machine A3C on torch.distributed: one node process per machine, started by torchrun,
synchronising with a parameter server on rank 0 over RPC. See docs/distributed.md."""
