"""What every command of ``vortexsim`` shares: exit codes, the one-line usage error, the
shipped case files and the device check."""
from __future__ import annotations

import os

from .signals import say_line

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "UsageError", "first_line", "say",
           "case_files_dir", "case_file", "check_device"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad input: reported as one line, exit code 2."""


def case_files_dir():
    """Directory of the shipped case files: ``vortexsim/case_files`` (installed package
    data, a link to the repository's ``cases/`` in a source checkout) or ``cases/``."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for d in (os.path.join(here, "case_files"), os.path.join(os.path.dirname(here), "cases")):
        if os.path.isdir(d):
            return d
    return os.path.join(here, "case_files")


def case_file(name):
    """Path of the shipped case file of ``name`` (None if there is none)."""
    path = os.path.join(case_files_dir(), f"{name}.toml")
    return path if os.path.isfile(path) else None


def first_line(exc):
    """The first line of the message of ``exc`` (its type name when it has none)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def say(message):
    """``message`` on stderr, at once (the one line of an outcome: a signal that comes
    later adds no other, :mod:`vortexsim.cli.signals`)."""
    say_line(message)


def check_device(device):
    """UsageError (one line) when ``device`` cannot be used: an unknown name, or "gpu"
    without CuPy or a visible GPU."""
    from ..backend import resolve_device  # noqa: PLC0415
    try:
        resolve_device(device)
    except (RuntimeError, ValueError) as exc:
        raise UsageError(first_line(exc)) from None
