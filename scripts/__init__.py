"""Maintenance scripts (python -m scripts.X where they import the package)."""
