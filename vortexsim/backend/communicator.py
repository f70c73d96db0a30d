"""The communicator between the processes of one run.

Every collective operation of vortexsim goes through a :class:`Communicator`: its rank and
size, a barrier, a sum over ranks of an array, and the gathering and broadcasting of
Python objects.  Today a run is one process (:class:`SingleProcess`: rank 0 of 1, every
operation the identity).  This is the slot where distribution plugs in, behind the same
interface, with the run's other components unchanged:

* MPI ranks through mpi4py: ``rank = comm.Get_rank()``, ``size = comm.Get_size()``,
  ``barrier = comm.Barrier``, ``allreduce_sum`` = ``comm.Allreduce(array, out, op=MPI.SUM)``
  on host arrays, ``allgather = comm.allgather``, ``bcast = comm.bcast``;
* NCCL through CuPy (``cupy.cuda.nccl.NcclCommunicator``, one GPU per rank, its unique id
  broadcast over MPI): ``allReduce`` of device arrays on the run's stream, without a host
  copy, and the object operations over MPI.

An implementation must keep the run deterministic where its summation is: the same
inputs on every rank give the same result on every rank (``allreduce_sum`` sums in an
order that does not depend on timing).
"""
from __future__ import annotations

import abc

import numpy as np

__all__ = ["Communicator", "SingleProcess"]


class Communicator(abc.ABC):
    """The collective operations between the ``size`` processes of a run.

    Attributes
    ----------
    rank : int, this process's number, 0 ≤ rank < size
    size : int, the number of processes
    """

    rank: int
    size: int

    @property
    def is_root(self) -> bool:
        """True on rank 0 (the process that writes the run's files and logs)."""
        return self.rank == 0

    @abc.abstractmethod
    def barrier(self):
        """Return once every process has called it."""

    @abc.abstractmethod
    def allreduce_sum(self, array):
        """The element-wise sum of ``array`` (NumPy or CuPy, the same shape and dtype on
        every rank) over all ranks, on every rank; a new array of the same namespace."""

    @abc.abstractmethod
    def allgather(self, obj):
        """[obj of rank 0, obj of rank 1, ...] on every rank (picklable objects)."""

    @abc.abstractmethod
    def bcast(self, obj, root=0):
        """The ``obj`` of rank ``root`` on every rank."""

    def alltoall(self, parts):
        """Personalised exchange: ``parts`` is a list of ``size`` objects (arrays), the
        r-th for rank r; returns the list of what each rank sent to this one, in rank
        order.  The default goes through :meth:`allgather` (every part to every rank:
        correct, but P times the traffic); MPI and NCCL communicators send each part to
        its rank only."""
        if len(parts) != self.size:
            raise ValueError(f"alltoall needs one part per rank ({self.size}), got "
                             f"{len(parts)}.")
        return [sent[self.rank] for sent in self.allgather(list(parts))]

    def gather_rows_on_root(self, part, counts, out=None, chunk_rows=1 << 23):
        """Every rank's host rows ``part`` (counts[r], ...) into ``out`` on rank 0, in
        rank order (``out``: an array of sum(counts) rows and ``part``'s dtype there, e.g.
        a memory map; None on the other ranks, and on rank 0 where it could not make one:
        the rows are then received and dropped, so that the other ranks still finish),
        in messages of at most ``chunk_rows`` rows, so that no message and no buffer of
        rank 0 holds more.  Collective.  The default goes through :meth:`alltoall`
        rounds; the MPI communicators send each message from its rank's buffer into its
        place in ``out`` (no pickling, no copy)."""
        counts = [int(c) for c in counts]
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        rounds = max(-(-c // chunk_rows) for c in counts) if counts else 0
        empty = part[:0]
        for k in range(rounds):
            chunk = part[k * chunk_rows:(k + 1) * chunk_rows]
            got = self.alltoall([chunk if q == 0 else empty for q in range(self.size)])
            if self.rank == 0 and out is not None:
                for q, rows in enumerate(got):
                    at = int(starts[q]) + k * chunk_rows
                    out[at:at + rows.shape[0]] = rows

    def scatter_rows_from_root(self, whole, counts, tail=(), dtype=np.float64,
                               chunk_rows=1 << 23):
        """This rank's rows (counts[rank], *tail) of ``dtype`` of rank 0's host array
        ``whole`` (sum(counts), *tail) (None on the other ranks), the ranks' rows in rank
        order: the inverse of :meth:`gather_rows_on_root`, in messages of at most
        ``chunk_rows`` rows.  Collective.  The default goes through :meth:`alltoall`
        rounds; the MPI communicators send each message from ``whole`` straight into
        its place in the receiver's rows."""
        counts = [int(c) for c in counts]
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        out = np.empty((counts[self.rank], *tail), dtype)
        empty = out[:0]
        for k in range(max(-(-c // chunk_rows) for c in counts) if counts else 0):
            at = k * chunk_rows
            parts = [empty] * self.size
            if self.rank == 0:
                parts = [np.ascontiguousarray(
                    whole[int(starts[q]) + at:int(starts[q]) + min(at + chunk_rows, c)],
                    dtype=dtype) for q, c in enumerate(counts)]
            rows = self.alltoall(parts)[0]
            out[at:at + rows.shape[0]] = rows
        return out

    def any(self, flag):
        """True on every rank when ``flag`` is true on any rank (the ranks' agreement on
        a stop: a signal or a wall-time limit reaches them at different steps)."""
        return any(bool(f) for f in self.allgather(bool(flag)))

    def describe(self) -> str:
        """One line for the run log, e.g. ``'single process'`` or ``'MPI rank 3 of 8'``."""
        return f"{type(self).__name__} rank {self.rank} of {self.size}"


class SingleProcess(Communicator):
    """The communicator of a run in one process: rank 0 of 1; a barrier returns at once,
    the sum over ranks is a copy of the array, the gathered list has one item and a
    broadcast returns its object."""

    rank = 0
    size = 1

    def barrier(self):
        return None

    def allreduce_sum(self, array):
        return array.copy()

    def allgather(self, obj):
        return [obj]

    def bcast(self, obj, root=0):
        if root != 0:
            raise ValueError(f"root must be a rank of this communicator (0), got {root!r}.")
        return obj

    def alltoall(self, parts):
        if len(parts) != 1:
            raise ValueError(f"alltoall needs one part per rank (1), got {len(parts)}.")
        return list(parts)

    def scatter_rows_from_root(self, whole, counts, tail=(), dtype=np.float64,
                               chunk_rows=1 << 23):
        return np.array(whole, dtype=dtype)

    def any(self, flag):
        return bool(flag)

    def describe(self) -> str:
        return "single process"
