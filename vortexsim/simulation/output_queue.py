"""The run's output queue: the writers' file writes, at once or on the output thread, with
deferred writes and the rollback of failed ones.

A writer's ``write(sim)`` captures what it writes on the main thread and hands the file
I/O to :meth:`OutputQueue.submit` (through :meth:`Simulation.submit_output`).  Inside a
run with asynchronous output the write is queued on the run's
:class:`~vortexsim.simulation.output_thread.WriterThread` (one thread, FIFO, two pending at
most); a write that fails there is raised on the main thread at the next submission, poll
or flush, after its ``undo`` and the rollback of its writer's schedule, so that the output
stays owed.
"""
from __future__ import annotations

import contextlib
import dataclasses

from ..schedules import load_schedule_state
from .output_thread import Job, WriterThread

__all__ = ["OutputQueue", "OutputCall"]


@dataclasses.dataclass
class HeldWrite:
    """A write of :meth:`OutputQueue.submit` not yet queued: the writer's name, its
    ``func``, the rollbacks of the outputs it writes (newest first: its own and those of
    the deferred writes it replaced) and their number."""

    name: str
    func: object
    rollbacks: list
    outputs: int = 1

    def undo(self):
        for rollback in self.rollbacks:
            rollback()


@dataclasses.dataclass
class OutputCall:
    """The writer that the run is calling: its name, its schedule and the schedule's state
    before it fired (None in ``finalize``), and whether it handed a write to
    :meth:`OutputQueue.submit` (whose rollback then owns the schedule)."""

    name: str
    schedule: object = None
    before: object = None
    submitted: bool = False


class OutputQueue:
    """The writes of one simulation's runs (see the module docstring).

    ``timings``: the run's :class:`~vortexsim.simulation.timings.RunTimings` (the output
    thread's timings are kept there when it closes, and a writer's call is timed there).
    """

    def __init__(self, timings):
        self.timings = timings
        self.writer = None             # the run's WriterThread (async output, inside run())
        self.call = None               # the writer being called: OutputCall
        self._owed = []                # (schedule, state) of writes being undone
        self._held = None              # a writer's deferred write, not queued yet: HeldWrite

    def open(self, async_output):
        """Start a run's output: an output thread with ``async_output``, else none."""
        self.writer = WriterThread() if async_output else None

    def waited(self):
        """Seconds the main thread has waited for the output thread in this run."""
        return 0.0 if self.writer is None else self.writer.waited

    def submit(self, func, undo=None, *, defer=False):
        """Write files: ``func()`` runs on the run's output thread (inside :meth:`Simulation.run`, with
        :attr:`Simulation.async_output`), after every write submitted before it, or at once.

        A writer's ``write(sim)`` or ``finalize(sim, reason)`` captures what it writes
        (host copies) and hands the file I/O to this.  ``func`` must use only what was
        captured (no device arrays, no simulation state): it runs while the next steps
        are computed.  ``undo()`` (optional, main thread) forgets what the writer
        recorded for this output if the write fails or is discarded after an earlier
        failure; the writer's schedule is then restored as well (to its state before the
        newest such output), so that the output stays owed.  Raises the exception of a
        write that failed before; waits while two writes are pending.

        ``defer=True`` (a file rewritten in full at every output, e.g. the diagnostics
        file): inside :meth:`Simulation.run` a writer's deferred write is held, not queued, until
        the first of: the same writer submits again (the newer write replaces it, so it
        must write everything the held one would have), another writer or a callback
        submits a write (which then follows it: a snapshot finds the files written
        before it complete), or a flush (:meth:`flush`, and so the end of every
        run).  A replaced write keeps its ``undo`` and schedule: when the write that
        replaced it fails, both are undone, newest first.  Elsewhere ``defer`` writes at
        once.
        """
        call = self.call
        name, schedule, before = ("output", None, None) if call is None else \
            (call.name, call.schedule, call.before)
        if call is not None:
            call.submitted = True

        def rollback():
            if undo is not None:
                undo()
            if schedule is not None:
                self._owed.append((schedule, before))

        with self.owing():
            held, self._held = self._held, None
            rollbacks, outputs = [rollback], 1
            if held is not None and held.name == name:     # replaced by this write
                rollbacks += held.rollbacks
                outputs += held.outputs
            elif held is not None:
                self._write(held, discarded=rollback)
            if defer and call is not None:
                held = HeldWrite(name, func, rollbacks, outputs)
                if self.writer is not None:      # waits and fails as a submission would
                    self.writer.admit(Job(name, func, held.undo))
                self._held = held
                return
            self._write(HeldWrite(name, func, rollbacks, outputs))

    def _write(self, held, discarded=None):
        """Queue the write ``held`` (:class:`HeldWrite`) on the output thread, or write it
        now.

        ``discarded``: the rollback of the write that is to follow this one, which is
        then not queued if this one cannot be (an earlier failure raised here, or this
        one failed when written now); it is undone first, being the newer."""
        queued = False

        def undo():
            if discarded is not None and not queued:
                discarded()
            held.undo()

        if self.writer is not None:
            self.writer.submit(Job(held.name, held.func, undo, outputs=held.outputs))
            queued = True
            return
        try:
            held.func()
        except BaseException:
            undo()
            raise
        queued = True

    def flush(self):
        """Write the deferred writes and wait until every submitted file is on disk;
        raises the exception of a write that failed."""
        with self.owing():
            held, self._held = self._held, None
            if held is not None:
                self._write(held)
            if self.writer is not None:
                self.writer.flush()

    def poll(self):
        """Raise the exception of a write that failed on the output thread (no wait)."""
        if self.writer is not None:
            with self.owing():
                self.writer.poll()

    @contextlib.contextmanager
    def owing(self):
        """Restore the schedules of the writes undone in the block (failed, or discarded
        after a failure; undone newest first): each writer's to its state before the
        newest of them, so that one output stays owed, as after a failed synchronous
        write, and a restart writes it at once and is back on its times."""
        try:
            yield
        finally:
            owed, self._owed = self._owed, []
            for schedule, before in reversed(owed):      # oldest first: the newest wins
                load_schedule_state(schedule, before)

    @contextlib.contextmanager
    def calling(self, name, schedule=None, before=None):
        """The writer ``name`` is being called (for :meth:`submit`): its schedule and the
        schedule's state before it fired (None: a finalize)."""
        outer = self.call
        self.call = call = OutputCall(name, schedule, before)
        try:
            yield call
        finally:
            self.call = outer

    def writer_call(self, name, schedule, before, fn, count=True):
        """``fn()`` as a call of the writer ``name`` whose ``schedule`` fired from the
        state ``before``: timed under its name (and counted, unless ``count`` is False),
        and when it raises, the schedule is left as it was unless a submitted write's
        rollback already restored it."""
        with self.calling(name, schedule, before) as call:
            try:
                with self.timings.timed(name, count):
                    fn()
            except BaseException:
                if not call.submitted:            # (else its rollback restored it)
                    load_schedule_state(schedule, before)
                raise

    def close(self):
        """Stop the run's output thread and keep its timings in the run's timings.
        Idle after the final flush; with writes still pending (a KeyboardInterrupt, e.g.
        a second Ctrl-C, cut the run short) it is aborted: the queued writes are given
        up and the one in flight gets up to 5 s to finish (no partial file)."""
        writer, self.writer = self.writer, None
        held, self._held = self._held, None
        with self.owing():
            if held is not None:            # never queued: given up like the queued ones
                held.undo()
            if writer is None:
                return
            if writer.pending:
                writer.abort(timeout=5.0)
            else:
                writer.close()
        self.timings.output_timings = {
            name: {"write": w, "waited": d, "jobs": n, "files": f}
            for name, (w, d, n, f) in writer.timings.items()}
        self.timings.output_waited = writer.waited
