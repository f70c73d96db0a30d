"""A Ctrl-C or SIGTERM while the ``vortexsim`` command starts: one line.

The command's own handlers (:func:`vortexsim.cli.main`) exist only once the package is
imported, which takes about half a second (NumPy, xarray, the FMM modules).  A SIGINT
before that would raise KeyboardInterrupt inside some import, and Python would print its
traceback (or, inside NumPy's C start-up, an ImportError about a bad install); a SIGTERM
would end the process silently.  :func:`guard_startup`, called first thing by
``vortexsim/__init__.py``, installs handlers that write one line and exit at once with
128 + signal (130, 143) — only when this process is the ``vortexsim`` command (the
console script, or ``python -m vortexsim``), so importing the package as a library
changes nothing.  Nothing has been written at that point, so exiting at once loses
nothing.  :func:`end_startup` (the first thing ``main`` does) gives SIGINT back to
Python's KeyboardInterrupt.  A KeyboardInterrupt that escapes anyway (a handler that ran
late) is turned into the same line by a ``sys.excepthook``.
"""
from __future__ import annotations

import os
import signal
import sys

__all__ = ["guard_startup", "end_startup", "is_command"]


def _message(signum):
    return (f"vortexsim: interrupted by {signal.Signals(signum).name} while starting "
            "(nothing was written)\n")


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


def _exit_now(signum, frame):
    try:
        os.write(2, _message(signum).encode())
    finally:
        os._exit(128 + signum)


def _excepthook(previous):
    def excepthook(kind, value, tb):
        if issubclass(kind, KeyboardInterrupt):
            _exit_now(signal.SIGINT, None)
        previous(kind, value, tb)
    excepthook._vortexsim_startup = True
    return excepthook


def guard_startup():
    """Install the start-up handlers when this process is the ``vortexsim`` command."""
    if not is_command() or getattr(sys.excepthook, "_vortexsim_startup", False):
        return
    sys.excepthook = _excepthook(sys.excepthook)
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) in (signal.default_int_handler, signal.SIG_DFL):
            try:
                signal.signal(sig, _exit_now)
            except ValueError:      # pragma: no cover - imported outside the main thread
                return


def end_startup():
    """Hand the signals back (SIGINT: KeyboardInterrupt; SIGTERM: the default) where the
    start-up handlers are still installed; a no-op otherwise."""
    if signal.getsignal(signal.SIGINT) is _exit_now:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is _exit_now:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
