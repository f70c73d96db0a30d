"""One command on the ranks that ``mpiexec -n P vortexsim run|restart …`` started.

Every rank runs the command: the same parameters, the same case, the same model (its
summation shares the targets among the ranks: :mod:`vortexsim.summation.distributed`) and
the same writers, whose schedules shorten the same steps and whose diagnostics rows make
the same collective sums.  Rank 0 alone touches the run directory (its checks, lock,
case files, snapshots, diagnostics, plot and ``run.log``), logs and shows the progress
bar (:attr:`vortexsim.Simulation.writes_files`); the others log errors only.

The ranks agree at every point where one of them could end the command alone, so that
no rank waits for ever in a collective that another has left:

* :meth:`Ranks.agree`: every rank runs a check; a :class:`UsageError` on any rank is
  raised on all (the first by rank, with its rank named when it is not rank 0's);
* :meth:`Ranks.on_root`: rank 0 does something with the file system (create and lock
  the run directory, write the case files, start a branch), the others wait for its
  outcome and raise its UsageError;
* during the run the ranks stop after the same step (:meth:`vortexsim.Simulation.run`:
  a signal reaches the ranks at different steps), and any other error on a rank ends
  every rank at once with that rank's message (:meth:`Ranks.abort`, ``MPI_Abort``).

One rank (no launcher) is today's command: :class:`~vortexsim.backend.SingleProcess`,
every method the plain call.
"""
from __future__ import annotations

import logging
import os

from .common import UsageError, first_line

__all__ = ["Ranks", "LauncherWatch", "command_ranks", "finalize_mpi"]

logger = logging.getLogger("vortexsim.cli")


class Ranks:
    """The communicator of a command (``comm``) and the ranks' agreements."""

    def __init__(self, comm):
        self.comm = comm

    @property
    def size(self):
        return self.comm.size

    @property
    def is_root(self):
        return self.comm.is_root

    def agree(self, func, *args, **kwargs):
        """``func(*args, **kwargs)`` on every rank; a UsageError on any rank is raised on
        every rank (the first by rank; rank 0 says it)."""
        try:
            result, error = func(*args, **kwargs), None
        except UsageError as exc:
            result, error = None, str(exc)
        if self.size > 1:
            self._raise_first(self.comm.allgather(error))
        elif error is not None:
            raise UsageError(error)
        return result

    def on_root(self, func, *args, share=False, **kwargs):
        """``func(*args, **kwargs)`` on rank 0 while the others wait; its UsageError
        raised on every rank, another exception ends every rank (:meth:`abort`).
        Returns its result on rank 0, and on the others too with ``share`` (a picklable
        result; else None there)."""
        if self.size == 1:
            return func(*args, **kwargs)
        result = error = None
        if self.is_root:
            try:
                result = func(*args, **kwargs)
            except UsageError as exc:
                error = str(exc)
            except Exception as exc:  # noqa: BLE001 - every rank must hear of it
                self.abort(f"{type(exc).__name__}: {first_line(exc)}")
        shared, error = self.comm.bcast((result if share else None, error))
        if error is not None:
            raise UsageError(error)
        return result if self.is_root else shared

    def use_device(self, device):
        """On GPU ranks, move the collectives of device arrays to NCCL (device to device,
        :class:`vortexsim.backend.nccl.NCCLCommunicator` over this MPI communicator)
        once the run's ``device`` is known (collective; nothing on one rank or the CPU).
        Each rank's GPU is made current first (node-local rank modulo the GPUs)."""
        if self.size == 1:
            return
        from ..backend.device import device_kind, select_gpu  # noqa: PLC0415
        if device_kind(device) != "gpu":
            return
        select_gpu()
        from ..backend.nccl import NCCLCommunicator, nccl_available  # noqa: PLC0415
        if nccl_available() and not isinstance(self.comm, NCCLCommunicator):
            self.comm = NCCLCommunicator(self.comm.comm)
        elif not nccl_available():
            logger.warning("GPU ranks without NCCL (cupy.cuda.nccl does not load): the "
                           "ranks' device arrays go through the host over MPI.")

    def sharing(self, device):
        """(ranks on this rank's machine, ranks on its GPU, ranks of the run): how many
        ranks' memory the machine and the GPU hold (``device`` "gpu" or "auto" with a
        GPU: the node's GPUs dealt out by node-local rank), and over how many ranks a
        state split by slabs goes.  Collective; (1, 1, 1) on one rank."""
        if self.size == 1:
            return 1, 1, 1
        import socket  # noqa: PLC0415
        hosts = self.comm.allgather(socket.gethostname())
        here = hosts.count(hosts[self.comm.rank])
        from ..backend.device import device_kind, import_cupy  # noqa: PLC0415
        gpus = import_cupy().cuda.runtime.getDeviceCount() if device_kind(device) == "gpu" \
            else 0
        return here, (-(-here // gpus) if gpus else 1), self.size

    def _raise_first(self, errors):
        for rank, error in enumerate(errors):
            if error is not None:
                raise UsageError(error if rank == 0 else f"(rank {rank}) {error}")

    def abort(self, message, code=1):
        """End every rank now, ``message`` said by this one (``MPI_Abort``); on one rank,
        a RuntimeError."""
        abort = getattr(self.comm, "abort", None)
        if self.size > 1 and abort is not None:
            abort(message, code)
        raise RuntimeError(message)


class LauncherWatch:
    """A callback after every step of a run on several ranks: when this rank's parent,
    the MPI launcher (or its node daemon), is gone, ``orphaned()`` is called once (the
    run then stops after the same step on every rank with a checkpoint, as on SIGTERM).
    A launcher killed outright (SIGKILL, a lost node daemon) signals nothing, and its
    ranks would otherwise run on, unseen, to their end."""

    schedule = None
    reads_state = False               # the rows due still run beside the next step

    def __init__(self, orphaned):
        self.parent = os.getppid()
        self.orphaned = orphaned
        self.gone = False

    def __call__(self, sim):
        if not self.gone and os.getppid() != self.parent:
            global _LAUNCHER_GONE
            self.gone = _LAUNCHER_GONE = True
            self.orphaned()


#: set when the launcher went away during the run: MPI_Finalize may then wait for a
#: daemon that is gone, so the ranks end without it
_LAUNCHER_GONE = False


def command_ranks(command):
    """The :class:`Ranks` of ``vortexsim COMMAND`` in this process: one rank outside an
    MPI launcher; under ``mpiexec -n P`` the MPI communicator of the P ranks (a
    UsageError naming the ``mpi`` extra when mpi4py is missing)."""
    from ..backend.launch import launched_ranks  # noqa: PLC0415
    from ..backend.mpi import MPI_EXTRA  # noqa: PLC0415
    from ..backend.world import make_communicator  # noqa: PLC0415
    try:
        return Ranks(make_communicator())
    except ImportError:
        raise UsageError(f"vortexsim {command} was started on {launched_ranks()} MPI ranks "
                         f"but mpi4py is not installed: pip install \"{MPI_EXTRA}\" (or "
                         "start it without mpiexec).") from None


def finalize_mpi():
    """``MPI_Finalize`` once the command is done, when this process initialised MPI: the
    command ends its process with ``os._exit`` (:func:`vortexsim.cli.signals.finish`),
    which skips mpi4py's own finalisation at the interpreter's exit, and a rank that
    exits without it is an abnormal termination to the launcher.

    The ranks meet first: a launcher ends the others once one rank exits with a code
    other than 0 (130 after a signal), so no rank may exit before rank 0 has written
    its checkpoint and said its line."""
    import sys  # noqa: PLC0415
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.COMM_WORLD.Barrier()
        if not _LAUNCHER_GONE:
            mpi.Finalize()
