"""Analysis tools: what runs learned, read from their event files and checkpoints (the speed
measurements are in benchmarks/). Every tool runs as `python -m analysis.<name>` from the
repository root."""
