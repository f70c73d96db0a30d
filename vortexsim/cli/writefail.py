"""What a failed file write says: "the disk is full" whenever it is (one line, the
directory and its free space), whatever error netCDF/HDF5 turned ENOSPC into."""
from __future__ import annotations

import errno
import os
import shutil

from .common import first_line
from .resources import format_bytes

__all__ = ["FULL_MARGIN", "is_write_failure", "free_space", "disk_full_text",
           "os_error_text"]


def is_write_failure(exc):
    """A file write that failed (the output thread's or the main thread's): an OSError
    (disk full, permission, read-only file system) or netCDF4's RuntimeError
    ("NetCDF: HDF error", what a full disk gives inside HDF5)."""
    return isinstance(exc, OSError) or (isinstance(exc, RuntimeError)
                                        and ("NetCDF" in str(exc) or "HDF" in str(exc)))


#: [B] free space below which a failed write counts as a full disk whatever its error says
#: (netCDF/HDF5 report a full disk as "HDF error" or even "Permission denied")
FULL_MARGIN = 1 << 20


def _errno_of(exc):
    """The errno of ``exc`` or of the OSError it was raised from (None if none)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if getattr(exc, "errno", None) is not None:
            return exc.errno
        exc = exc.__cause__ or exc.__context__
    return None


def free_space(directory):
    """(bytes free in ``directory`` or None, its text: ``"12 kB free"``)."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return None, "free space unknown"
    return free, f"{format_bytes(free)} free"


def disk_full_text(exc, directory, next_size=0):
    """``"the disk is full (DIR: 12 kB free)"`` when the failed write ``exc`` ran out of
    space: ENOSPC/EDQUOT, or an error that netCDF/HDF5 gives on a full disk (their
    errno is not to be trusted there) while ``directory`` is writable and has less free
    than :data:`FULL_MARGIN` or twice ``next_size`` [B] (the size of the file that was
    being written, if known); None otherwise."""
    code = _errno_of(exc)
    free, text = free_space(directory)
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return f"the disk is full ({directory}: {text})"
    if code == errno.EROFS or free is None or free >= max(FULL_MARGIN, 2 * next_size):
        return None
    if code in (errno.EACCES, errno.EPERM) and not os.access(directory, os.W_OK):
        return None
    return f"the disk is full ({directory}: {text}; the write failed with: {first_line(exc)})"


def os_error_text(exc, directory):
    """The reason of a failed write into ``directory`` for a one-line message: "the disk
    is full (...)" (:func:`disk_full_text`) or the error's own text."""
    full = disk_full_text(exc, directory)
    if full is not None:
        return full
    return (getattr(exc, "strerror", None) or first_line(exc)) + \
        (f" ({exc.filename})" if getattr(exc, "filename", None) else "")
