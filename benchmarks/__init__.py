"""Speed measurements, a memory soak and the Atari suite (not tests). Every tool runs as
`python -m benchmarks.<name>` from the repository root; the analysis tools are in analysis/."""
