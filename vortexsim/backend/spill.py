"""Host arrays backed by a file instead of memory: where a large whole state is put
together on one rank (the snapshot of a state split by slabs over the ranks,
:meth:`vortexsim.model.slab_partition.SlabPartition.assemble_on_root`), its parts go
into such arrays as they arrive, so that the rank holds one part at a time in memory
and the operating system pages the rest in and out as the snapshot's writer reads it.

:func:`spill_array` makes a writable memory map of a temporary file that is unlinked at
once (it disappears when the last array of it is freed, also when the process dies);
:func:`frozen` gives the read-only array that the state holds once it is filled (in a
file or in memory), which :func:`vortexsim.backend.device.host_copy` returns as it is:
nothing changes it, and a copy would pull a file into memory, or cost a fresh
allocation of the whole state at every snapshot.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

__all__ = ["spill_array", "Frozen", "frozen", "is_frozen", "should_spill", "SPILL_FRACTION"]

#: a whole state larger than this fraction of the memory available now goes to files
#: (:func:`should_spill`): the output thread may hold a few captured states at once, and
#: in memory they cost nothing to write and read (at 256³, 1.2 GB a snapshot, writing
#: them to files made a 2-GPU run's loop 9 s longer for 5 snapshots)
SPILL_FRACTION = 0.25


def should_spill(nbytes, reserved=0):
    """Whether a whole state of ``nbytes`` goes to files: above :data:`SPILL_FRACTION` of
    the memory available now (Linux's MemAvailable within the cgroup's limit,
    :func:`vortexsim.backend.memory.host_available_memory`; where unknown, in memory),
    less ``reserved`` [bytes] (a check before the run: what the run will take first)."""
    from .memory import host_available_memory  # noqa: PLC0415
    available = host_available_memory()
    return available is not None and nbytes > SPILL_FRACTION * (available - reserved)


def spill_array(shape, dtype, directory):
    """A writable :class:`numpy.memmap` of ``shape`` and ``dtype`` in a temporary file of
    ``directory``, the file unlinked already (an empty array: a plain one).  The file's
    blocks are allocated here (``posix_fallocate``), so that a full disk is an OSError
    now, not a SIGBUS when a page of the map is first written."""
    shape = tuple(int(s) for s in np.atleast_1d(shape))
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    if size == 0:
        return np.empty(shape, dtype)
    fd, path = tempfile.mkstemp(prefix=".vortexsim_spill_", suffix=".tmp", dir=directory)
    try:
        os.posix_fallocate(fd, 0, size)
        return np.memmap(path, dtype=dtype, mode="r+", shape=shape)
    finally:
        os.close(fd)
        os.unlink(path)


class Frozen(np.ndarray):
    """A read-only array whose data nothing changes any more (:func:`frozen`)."""


def frozen(array):
    """A read-only view of a filled array (a :func:`spill_array` or one in memory) that
    :func:`vortexsim.backend.device.host_copy` hands on as it is; the caller keeps no
    writable reference.  A memory map is not flushed: no other process reads the file,
    and the system writes its pages back only as memory needs."""
    view = array.view(Frozen)
    view.flags.writeable = False
    return view


def is_frozen(array):
    """Whether ``array`` is a :func:`frozen` array (read-only: its data stays as is)."""
    return isinstance(array, Frozen) and not array.flags.writeable
