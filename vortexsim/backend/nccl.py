"""GPU ranks through NCCL (CuPy's binding): the collectives on device arrays of a run
whose ranks hold one GPU each, without a host copy.

:class:`NCCLCommunicator` is an :class:`~vortexsim.backend.mpi.MPICommunicator` (mpi4py
starts it, and its object operations, barrier and abort stay MPI's) with a
``cupy.cuda.nccl.NcclCommunicator`` of the same ranks beside it: rank 0 draws NCCL's
unique id, MPI broadcasts it, and every rank joins with its own GPU, the current CUDA
device (:func:`vortexsim.backend.device.select_gpu`: ``local_rank() % device count``,
chosen before NCCL starts by :func:`vortexsim.backend.mpi.make_communicator`).

On CuPy arrays:

* ``allgather_array(array, counts=None)``: the ranks' arrays concatenated along axis 0,
  in rank order.  Parts of equal length: one ``ncclAllGather`` straight into the result;
  of different lengths: one ``ncclBroadcast`` from each rank into its rows of the result,
  all in one NCCL group (NCCL's own recipe for an all-gather-v: no padding, no copy
  after).  Row counts come from ``counts`` or from one small MPI exchange;
* ``allreduce_sum(array)``: the arrays gathered, then added in rank order on the device,
  so that every rank holds the same bits whatever the timing (NCCL's own reductions
  choose their order by algorithm and message size, as MPI's do);
* ``alltoall(parts)``: ``ncclSend``/``ncclRecv`` of each part to its rank inside
  ``groupStart``/``groupEnd``; the parts' shapes go over MPI first.

Every NCCL call runs on CuPy's current stream, after the kernels that made its input
and before those that read its output (stream order), and moves bytes
(``NCCL_UINT8``): any dtype, no arithmetic in NCCL.  NumPy arrays and other objects go
the :class:`~vortexsim.backend.mpi.MPICommunicator` way.

On the lent multi-GPU machines keep NVLink multicast off (``NCCL_NVLS_ENABLE=0``, set
there; ``benchmarks/tools/scaling_gpu.sh`` keeps it).
"""
from __future__ import annotations

import logging

import numpy as np

from .device import import_cupy, is_cupy_array, select_gpu
from .mpi import MPICommunicator

logger = logging.getLogger(__name__)

__all__ = ["NCCLCommunicator", "nccl_available"]


def _nccl():
    """CuPy's NCCL module, or None where CuPy or its NCCL library does not load."""
    try:
        from cupy.cuda import nccl  # noqa: PLC0415
    except ImportError:
        return None
    return nccl if getattr(nccl, "available", False) else None


def nccl_available() -> bool:
    """True when CuPy imports and its NCCL binding loads (``cupy.cuda.nccl.available``)."""
    return _nccl() is not None


class NCCLCommunicator(MPICommunicator):
    """The ranks of an MPI communicator (default ``MPI.COMM_WORLD``), one GPU each, with
    NCCL for the collectives on CuPy arrays (see the module docstring).

    Parameters
    ----------
    comm : mpi4py communicator or None (``MPI.COMM_WORLD``)

    Attributes
    ----------
    rank, size : int, as MPI numbers the ranks (NCCL's ranks are the same)
    gpu : int, the CUDA device of this rank (current when it was made)
    nccl : ``cupy.cuda.nccl.NcclCommunicator``
    """

    def __init__(self, comm=None):
        super().__init__(comm)
        nccl = _nccl()
        if nccl is None:
            raise RuntimeError("NCCLCommunicator needs CuPy with its NCCL library "
                               "(cupy.cuda.nccl.available is False); install NCCL for "
                               "your CUDA (pip install nvidia-nccl-cu13 or -cu12), or use "
                               "MPICommunicator (make_communicator() without a GPU "
                               "device).")
        cp = import_cupy()
        self._lib = nccl
        self._cp = cp
        # NCCL joins with the current device: this rank's (make_communicator chose it
        # already; choosing again is a no-op)
        select_gpu()
        self.gpu = int(cp.cuda.runtime.getDevice())
        uid = nccl.get_unique_id() if self.rank == 0 else None
        uid = self.comm.bcast(uid, root=0)
        self.nccl = nccl.NcclCommunicator(self.size, uid, self.rank)
        logger.debug("NCCL rank %d of %d on GPU %d (NCCL %s)", self.rank, self.size,
                     self.gpu, nccl.get_version())

    # -- helpers ---------------------------------------------------------------------
    def _stream(self):
        return self._cp.cuda.get_current_stream().ptr

    def _group(self, calls):
        """Run ``calls`` (functions of no argument, each one NCCL call) in one NCCL
        group; nothing when there are none."""
        if not calls:
            return
        self._lib.groupStart()
        try:
            for call in calls:
                call()
        finally:
            self._lib.groupEnd()

    # -- device collectives ----------------------------------------------------------
    def allgather_array(self, array, counts=None):
        """The concatenation along axis 0 of every rank's ``array``, in rank order, on
        every rank: CuPy arrays through NCCL, on the device (NumPy arrays through MPI,
        :meth:`MPICommunicator.allgather_array`).  ``counts``: the rows of every rank's
        part when the caller knows them (else one small MPI exchange of the shapes,
        which also checks that the trailing shapes and dtypes agree)."""
        if not is_cupy_array(array):
            return super().allgather_array(array, counts)
        cp, nccl = self._cp, self._lib
        part = cp.ascontiguousarray(array)
        counts = self._part_rows(part.shape, part.dtype, counts)
        out = cp.empty((sum(counts), *part.shape[1:]), part.dtype)
        row_bytes = part.dtype.itemsize * int(np.prod(part.shape[1:], dtype=np.int64))
        if not (row_bytes and out.shape[0]):
            return out
        stream, send = self._stream(), part.data.ptr
        if all(c == counts[0] for c in counts):             # equal parts: one allGather
            self.nccl.allGather(send, out.data.ptr, counts[0] * row_bytes, nccl.NCCL_UINT8,
                                stream)
            return out
        # parts of different lengths: each rank broadcasts its part into its rows
        offsets = np.concatenate([[0], np.cumsum(counts)]) * row_bytes
        self._group([
            (lambda r=r: self.nccl.broadcast(send, out.data.ptr + int(offsets[r]),
                                             counts[r] * row_bytes, nccl.NCCL_UINT8, r,
                                             stream))
            for r in range(self.size) if counts[r]])
        return out

    def allreduce_sum(self, array):
        """The element-wise sum over ranks of ``array`` (the same shape and dtype on every
        rank), on every rank: CuPy arrays gathered through NCCL and added in rank order
        on the device, the same bits on every rank and as the MPI communicator's sum
        (NumPy arrays: :meth:`MPICommunicator.allreduce_sum`)."""
        if not is_cupy_array(array):
            return super().allreduce_sum(array)
        cp = self._cp
        shapes = self.comm.allgather((tuple(array.shape), array.dtype.str))
        if any(s != shapes[0] for s in shapes):
            raise ValueError("allreduce_sum needs the same shape and dtype on every rank; "
                             f"got {shapes} ((shape, dtype) per rank).")
        flat = cp.ascontiguousarray(array).reshape(1, -1)
        parts = self.allgather_array(flat, counts=[1] * self.size)
        total = parts[0].copy()
        for r in range(1, self.size):
            total += parts[r]
        return total.reshape(array.shape)

    def alltoall(self, parts):
        """Personalised exchange (:meth:`Communicator.alltoall`): with CuPy arrays for
        every rank, each part goes to its rank only, by NCCL send/recv in one group (the
        shapes and dtypes over MPI first); any other parts through MPI."""
        if len(parts) != self.size:
            raise ValueError(f"alltoall needs one part per rank ({self.size}), got "
                             f"{len(parts)}.")
        if not all(is_cupy_array(p) for p in parts):
            return super().alltoall(parts)
        cp, nccl = self._cp, self._lib
        parts = [cp.ascontiguousarray(p) for p in parts]
        kinds = self.comm.alltoall([(tuple(p.shape), p.dtype.str) for p in parts])
        got = [cp.empty(shape, np.dtype(dtype)) for shape, dtype in kinds]
        got[self.rank][...] = parts[self.rank]
        stream, calls = self._stream(), []
        for peer in range(self.size):
            if peer == self.rank:
                continue
            if parts[peer].nbytes:
                calls.append(lambda p=peer: self.nccl.send(
                    parts[p].data.ptr, parts[p].nbytes, nccl.NCCL_UINT8, p, stream))
            if got[peer].nbytes:
                calls.append(lambda p=peer: self.nccl.recv(
                    got[p].data.ptr, got[p].nbytes, nccl.NCCL_UINT8, p, stream))
        self._group(calls)
        return got

    def close(self):
        """Wait for this rank's GPU work, then free the NCCL communicator (its device
        buffers); the MPI side stays.  Call it on every rank when the collectives are
        done (garbage collection frees it otherwise, at a time no rank chooses)."""
        self._cp.cuda.get_current_stream().synchronize()
        self.nccl.destroy()

    def describe(self) -> str:
        return f"MPI rank {self.rank} of {self.size} (NCCL, GPU {self.gpu})"
