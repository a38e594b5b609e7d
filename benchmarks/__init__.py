"""Measurements and the Atari suite. Modules run with `python -m benchmarks.<name>` from the
repository root; the older scripts also run as `python benchmarks/<name>.py`."""
