"""Errors that are the user's to fix: the entry points print them as one line and exit 2."""


class UsageError(Exception):
    """A bad flag, path, env id or checkpoint. The message names what is wrong."""
