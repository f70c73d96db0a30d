"""Logging of the ``vortexsim`` command: the terminal handler (through tqdm, so that
records do not break the progress bar) and ``run.log`` of a run directory.  Only the
command configures handlers; every module of the package just logs."""
from __future__ import annotations

import logging
import os
import sys

__all__ = ["TqdmHandler", "RunLog", "remove_handlers", "setup_logging", "add_file_log",
           "log_to_file"]

logger = logging.getLogger("vortexsim.cli")


class TqdmHandler(logging.StreamHandler):
    """Log records written through tqdm.write, so they do not break the progress bar.
    A record logged with ``extra={"file_only": True}`` (a detail of a failure whose one
    line the command prints) goes to run.log only."""

    def emit(self, record):
        if getattr(record, "file_only", False):
            return
        try:
            from tqdm import tqdm  # noqa: PLC0415
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # noqa: BLE001
            self.handleError(record)


def remove_handlers():
    root = logging.getLogger("vortexsim")
    for h in list(root.handlers):
        if getattr(h, "_vortexsim_cli", False):
            root.removeHandler(h)
            try:
                h.close()
            except (OSError, ValueError):   # the terminal or a file on a full disk
                pass


def setup_logging(args, communicator=None):
    """The terminal's handler at the level of ``-q``/``-v``; on the ranks of an MPI run
    (``communicator`` of several) rank 0 logs as one process does and the others their
    errors alone, each line naming its rank."""
    level = {0: logging.INFO, 1: logging.WARNING}.get(args.quiet, logging.ERROR)
    if args.verbose:
        level = logging.DEBUG
    prefix = ""
    if communicator is not None and communicator.size > 1:
        prefix = f"[rank {communicator.rank}] "
        if not communicator.is_root:
            level = logging.ERROR
    remove_handlers()
    root = logging.getLogger("vortexsim")
    handler = TqdmHandler()
    handler._vortexsim_cli = True
    handler.setFormatter(logging.Formatter(f"%(asctime)s {prefix}%(levelname)s %(message)s",
                                           "%H:%M:%S"))
    handler.setLevel(level)
    root.addHandler(handler)
    root.setLevel(min(level, logging.INFO))
    logging.captureWarnings(True)


class RunLog(logging.FileHandler):
    """run.log of a run directory.  A record that cannot be written (a full disk) is
    dropped and :attr:`failed` set, instead of logging's "--- Logging error ---" and a
    traceback on stderr for every record; the run's own failure is reported once, in one
    line (:func:`run_simulation`)."""

    failed = False

    def handleError(self, record):  # noqa: N802 - logging's name
        self.failed = True

    def flush(self):
        """Flush, or note the failure (a full disk) without a word."""
        try:
            super().flush()
        except (OSError, ValueError):
            self.failed = True

    def close(self):
        """Close; the data still buffered that cannot be written (a full disk) is
        dropped without a word (logging would print its traceback)."""
        try:
            super().close()
        except (OSError, ValueError):
            self.failed = True


def add_file_log(run_dir):
    handler = RunLog(os.path.join(run_dir, "run.log"), encoding="utf-8")
    handler._vortexsim_cli = True
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("vortexsim").addHandler(handler)


def log_to_file(message, exc):
    """``message`` and the traceback of ``exc`` into run.log only (not on the terminal);
    True when run.log failed (now or before)."""
    record = logger.makeRecord(logger.name, logging.ERROR, __file__, 0, message, (),
                               (type(exc), exc, exc.__traceback__))
    failed = False
    for handler in logging.getLogger("vortexsim").handlers:
        if isinstance(handler, RunLog):
            handler.handle(record)
            failed = failed or handler.failed
    return failed
