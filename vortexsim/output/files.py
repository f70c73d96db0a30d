"""Atomic file writes: a temporary name in the same directory, flush + fsync, rename.

A reader (or a crash) sees either the old file or the complete new one, never a partial
file: ``os.replace`` is atomic within one file system, and the directory is fsynced so
that the rename itself survives a power loss.  A process killed while writing leaves
only its temporary file, ``.NAME.xxxxxxxx.tmp``; :func:`remove_stale_tmp` removes those
(the writers do it when a run starts in their directory).
"""
from __future__ import annotations

import contextlib
import glob
import logging
import os
import secrets

logger = logging.getLogger(__name__)

__all__ = ["atomic_path", "write_text", "fsync_dir", "remove_stale_tmp"]


def fsync_dir(directory):
    """fsync a directory (the rename of an entry), where the OS allows it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _tmp_name(name, token):
    """The temporary name of :func:`atomic_path` for the file ``name`` (a glob pattern
    with ``token = "*"``)."""
    return f".{name}.{token}.tmp"


def remove_stale_tmp(directory, pattern):
    """Remove the temporary files that :func:`atomic_path` left in ``directory`` for the
    names matching ``pattern`` (e.g. ``"snapshot_*.nc"``): what a process killed while
    writing leaves.  Call it when no write to those names is under way.  Returns the
    paths removed."""
    removed = []
    for tmp in sorted(glob.glob(os.path.join(glob.escape(os.fspath(directory)),
                                             _tmp_name(pattern, "*")))):
        with contextlib.suppress(OSError):
            os.remove(tmp)
            removed.append(tmp)
    if removed:
        logger.info("removed %d stale temporary file(s) of an interrupted write: %s",
                    len(removed), ", ".join(os.path.basename(f) for f in removed))
    return removed


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path next to ``path``; on success fsync it and rename it to ``path``.

    The caller writes the complete file to the yielded path (and closes it).  On any
    exception (KeyboardInterrupt included) the temporary file is removed and ``path`` is
    left as it was.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    while True:  # like tempfile.mkstemp, but with the umask's permissions (0o666 & ~umask)
        tmp = os.path.join(directory, _tmp_name(os.path.basename(path), secrets.token_hex(4)))
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            break
        except FileExistsError:  # pragma: no cover
            continue
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    fsync_dir(directory)


def write_text(path, text):
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
