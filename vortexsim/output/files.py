"""Atomic file writes: a temporary name in the same directory, flush + fsync, rename.

A reader (or a crash) sees either the old file or the complete new one, never a partial
file: ``os.replace`` is atomic within one file system, and the directory is fsynced so
that the rename itself survives a power loss.
"""
from __future__ import annotations

import contextlib
import logging
import os
import secrets

logger = logging.getLogger(__name__)

__all__ = ["atomic_path", "fsync_dir"]


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
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
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
