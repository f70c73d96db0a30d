"""A Ctrl-C or SIGTERM while the ``vortexsim`` command starts: one line.

The command's own handlers would exist only once the package is imported, which takes
about half a second (NumPy, xarray, the FMM modules).  A SIGINT before that would raise
KeyboardInterrupt inside some import, and Python would print its traceback (or, inside
NumPy's C start-up, an ImportError about a bad install); a SIGTERM would end the process
silently.  :func:`guard_startup`, called first thing by ``vortexsim/__init__.py``,
installs the signal handling of the whole command (:mod:`vortexsim.cli.signals`: in its
start-up phase any signal writes one line and exits at once with 128 + signal, 130 or
143) — only when this process is the ``vortexsim`` command (the console script, or
``python -m vortexsim``), so importing the package as a library changes nothing.
Nothing has been written at that point, so exiting at once loses nothing.
"""
from __future__ import annotations

import os
import sys

from .signals import install

__all__ = ["guard_startup", "end_startup", "is_command"]


def is_command(argv=None, orig_argv=None):
    """True when this process is the ``vortexsim`` command: ``sys.argv[0]`` is the console
    script ``vortexsim``, or the interpreter was started as ``python -m vortexsim``."""
    argv = sys.argv if argv is None else argv
    orig = list(getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv)
    if argv and os.path.basename(argv[0]) in ("vortexsim", "vortexsim.exe"):
        return True
    if not argv or argv[0] != "-m":     # runpy's argv[0] while it imports the package
        return False
    return "-mvortexsim" in orig or any(a == "-m" and b == "vortexsim"
                                        for a, b in zip(orig, orig[1:]))


def guard_startup():
    """Install the command's signal handling when this process is the ``vortexsim``
    command (:func:`vortexsim.cli.signals.install`)."""
    if is_command():
        install()


def end_startup():
    """Kept for callers of the start-up module: the phases after start-up are set by
    ``main`` (:func:`vortexsim.cli.signals.during`); nothing to do here."""
