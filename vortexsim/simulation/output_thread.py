r"""The output thread of a run: file writes off the main thread, in submission order.

:meth:`vortexsim.Simulation.run` decides *when* a writer writes, and the writer captures
*what* on the main thread (host copies: the state, a diagnostics row, which needs the
device).  The file I/O (netCDF through xarray/netCDF4, the temporary name, fsync and
rename of :func:`vortexsim.output.atomic_path`) is a :class:`Job` that one background
thread runs while the next steps are computed::

    main thread                                 output thread
    step; capture; submit(job) ──── FIFO ────▶  job.func(): write the file
    step; ...      (waits when max_pending      ...
                    jobs are not yet written)
    flush() ◀─────── (seq, seconds, error) ───  done

* **One thread, FIFO.**  HDF5/netCDF4 is not thread-safe: every file of a run is written
  by this one thread, in the order of submission, so a snapshot's diagnostics row count
  is that of the diagnostics file written before it.
* **Bounded.**  At most ``max_pending`` jobs (default 2: one being written, one
  waiting) hold their captured data; :meth:`WriterThread.submit` waits for room.
* **Failures are not lost.**  The first job that raises stops the writing: the jobs
  after it are discarded, not run.  The main thread gets that job's exception (the same
  object, its message unchanged) at its next :meth:`~WriterThread.submit`,
  :meth:`~WriterThread.poll` or :meth:`~WriterThread.flush`, after the ``undo()`` of the
  failed and discarded jobs, newest first (the writers then record what is on disk);
  the thread then takes jobs again.
* **Signals.**  The thread blocks SIGINT and SIGTERM, so they are delivered to the main
  thread, where Python runs their handlers; a ``KeyboardInterrupt`` never lands inside a
  netCDF call (one that did would leave xarray's file lock held, and the process hung).
  The main thread waits in timed waits on a C queue (:class:`queue.SimpleQueue`) and
  holds no lock that the thread needs, so a handler runs at once, and may raise.
  :meth:`~WriterThread.abort` (a second Ctrl-C) then discards the queued jobs and waits a
  bounded time for the one in flight: no partial file is ever left under a final name
  (at most a ``.NAME.xxxxxxxx.tmp``, which the next run in that directory removes).
* **Timings.**  :attr:`WriterThread.timings`: per job name, the seconds written on the
  thread, the seconds the main thread waited for those jobs, the outputs and the jobs
  written.

This module imports nothing from vortexsim.
"""
from __future__ import annotations

import dataclasses
import logging
import queue
import signal
import threading
import time

logger = logging.getLogger(__name__)

__all__ = ["Job", "WriterThread"]

#: [s] longest single wait of the main thread before it looks again (thread alive?)
_POLL = 0.1
#: jobs a writer thread holds by default (queued + in flight): the snapshots and rows
#: captured and not yet written (a snapshot of a state split by slabs holds the whole
#: state on rank 0: :func:`vortexsim.cli.resources.spill_bytes`)
MAX_PENDING = 2


@dataclasses.dataclass
class Job:
    """One piece of file output for the thread.

    name : str, what it writes (a writer's name, e.g. ``"snapshots"``); timings by name
    func : callable ``func()``, run on the thread: file I/O only, from data captured on the
        main thread (no device arrays, no simulation state)
    undo : callable ``undo()`` or None, run on the main thread when the job fails or is
        discarded: forget what the writer recorded for it
    outputs : int, the outputs it writes (a rewrite of a whole file can write several,
        e.g. diagnostics rows whose own rewrites it replaced); counted in the timings
    """

    name: str
    func: object
    undo: object = None
    seq: int = 0
    outputs: int = 1


class WriterThread:
    """One daemon thread that runs :class:`Job` s in submission order (see the module
    docstring).  Every method is for the main thread (the thread that submits).

    Parameters
    ----------
    max_pending : int >= 1, most jobs submitted and not yet written (queued + in flight)
    name : str, the thread's name

    Attributes
    ----------
    timings : dict name → [seconds written on the thread, seconds the main thread waited
        for these jobs, outputs written (:attr:`Job.outputs`), jobs written]
    waited : float [s], all the main thread's waits (also those a signal cut short)
    """

    def __init__(self, max_pending=MAX_PENDING, name="vortexsim-output"):
        if isinstance(max_pending, bool) or int(max_pending) != max_pending or max_pending < 1:
            raise ValueError(f"max_pending must be an integer >= 1, got {max_pending!r}.")
        self.max_pending = int(max_pending)
        self.name = name
        self.timings = {}
        self.waited = 0.0
        self._jobs = queue.SimpleQueue()     # main → thread: Job, or None: stop
        self._done = queue.SimpleQueue()     # thread → main: (seq, seconds, exception, ran)
        self._pending = {}                   # seq → Job submitted and not reported back
        self._seq = 0
        self._thread = None
        self._failed = False                 # set by the thread, reset by the main thread
        self._aborted = False
        self._error = None                   # (exception, job): the first failure, not raised yet
        self._rollback = []                  # failed and discarded jobs, oldest first

    # -- the thread ----------------------------------------------------------------------
    def _work(self):
        if hasattr(signal, "pthread_sigmask"):       # signals go to the main thread
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if self._failed or self._aborted:
                self._done.put((job.seq, 0.0, None, False))
                continue
            t0 = time.perf_counter()
            try:
                job.func()
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                self._failed = True
                self._done.put((job.seq, time.perf_counter() - t0, exc, True))
            else:
                self._done.put((job.seq, time.perf_counter() - t0, None, True))

    def _start(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
            self._thread.start()

    # -- the main thread ---------------------------------------------------------------------
    @property
    def pending(self):
        """The number of jobs submitted and not yet written (or discarded)."""
        return len(self._pending)

    def submit(self, job):
        """Queue ``job`` (a :class:`Job`) after every job submitted before it; waits while
        ``max_pending`` jobs are pending.  Raises the exception of a job that failed since
        the last check (``job`` is then not queued: its ``undo()`` runs first)."""
        self.admit(job)
        self._start()
        self._seq += 1
        job.seq = self._seq
        self._pending[job.seq] = job
        self._jobs.put(job)

    def admit(self, job):
        """What :meth:`submit` does before it queues ``job``: wait while ``max_pending``
        jobs are pending, then raise the exception of a job that failed since the last
        check (``job``'s ``undo()`` first).  For a job that the caller holds back and
        submits later, so that holding it waits and fails as submitting it would."""
        self._collect_ready()
        if self._error is None:
            try:
                self._wait(lambda: len(self._pending) < self.max_pending)
            except BaseException:           # e.g. KeyboardInterrupt: the job is not queued
                if job.undo is not None:
                    job.undo()
                raise
        self._raise_failure(newest=job)

    def poll(self):
        """Without waiting: raise the exception of a job that failed since the last check."""
        self._collect_ready()
        self._raise_failure()

    def flush(self):
        """Wait until every submitted job is written; raise the exception of one that failed."""
        self._wait(lambda: not self._pending)
        self._raise_failure()

    def close(self):
        """Stop the thread after the jobs already queued (call :meth:`flush` first)."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None
        self._collect_ready()

    @property
    def aborting(self):
        """Whether :meth:`abort` has begun: the thread runs no job that was not yet
        started."""
        return self._aborted

    def abort(self, timeout=5.0):
        """Give up the output (a second Ctrl-C): discard the queued jobs, wait up to
        ``timeout`` [s] for the one being written (it completes its atomic rename or
        leaves only its temporary file), stop the thread.  Never raises a job's error;
        the failed and discarded jobs are undone.  Returns True when the thread stopped."""
        self._aborted = True
        stopped = True
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join(timeout)
            stopped = not self._thread.is_alive()
            if not stopped:
                logger.warning("output thread still writing after %.3g s; left behind (its "
                               "file stays under a temporary name)", timeout)
            self._thread = None
        self._collect_ready()
        self._error = None
        rollback, self._rollback = self._rollback[::-1], []
        for job in rollback:
            if job.undo is not None:
                job.undo()
        return stopped

    # -- bookkeeping (main thread) -----------------------------------------------------------
    def _collect(self, item, waited):
        seq, seconds, exc, ran = item
        job = self._pending.pop(seq, None)
        if job is None:
            return
        entry = self.timings.setdefault(job.name, [0.0, 0.0, 0, 0])
        entry[0] += seconds
        entry[1] += waited
        if ran and exc is None:
            entry[2] += job.outputs
            entry[3] += 1
            return
        self._rollback.append(job)
        if exc is not None and self._error is None:
            self._error = (exc, job)

    def _collect_ready(self):
        while True:
            try:
                item = self._done.get_nowait()
            except queue.Empty:
                return
            self._collect(item, 0.0)

    def _wait(self, condition):
        """Wait until ``condition()``; each wait is charged to the job it ended with."""
        if condition():
            return
        start = last = time.perf_counter()
        try:
            while not condition():
                try:
                    item = self._done.get(timeout=_POLL)
                except queue.Empty:
                    if self._thread is None or not self._thread.is_alive():
                        raise RuntimeError(
                            f"the output thread stopped with {len(self._pending)} file "
                            "write(s) pending; they are lost (an internal error: please "
                            "report it).") from None
                    continue
                now = time.perf_counter()
                self._collect(item, now - last)
                last = now
        finally:
            self.waited += time.perf_counter() - start

    def _raise_failure(self, newest=None):
        """After a failure: wait for the discarded jobs, undo them and the failed one
        (newest first: ``newest``, a job not queued, then the rest), take jobs again,
        and raise the failed job's exception."""
        if self._error is None:
            return
        if newest is not None and newest.undo is not None:
            newest.undo()
        self._wait(lambda: not self._pending)      # the rest are discarded, quickly
        (exc, job), self._error = self._error, None
        rollback, self._rollback = self._rollback[::-1], []
        self._failed = False                       # nothing in flight: safe to reset
        for j in rollback:
            if j.undo is not None:
                j.undo()
        if hasattr(exc, "add_note"):
            later = len(rollback) - 1 + (newest is not None)
            exc.add_note(f"(raised by the output thread while writing {job.name}; "
                         f"{later} later write(s) discarded)")
        raise exc
