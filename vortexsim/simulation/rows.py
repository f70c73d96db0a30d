"""Diagnostics rows run inside the next step, beside its kernels.

A step's host launches its kernels, then waits for the device.  A due diagnostics row
(about a fifth of a GPU step) run between two steps would leave the device idle; instead
the writer hands the row to :meth:`RowsInSteps.defer` and it runs in the next step,
between the launch of that step's work and its one transfer, while nothing of the step
is committed (so it sees the state it was due at), on the GPU on a second CUDA stream.
It runs earlier when anything else acts first (a due callback or writer, the end of the
run), and is given up with its schedule rolled back when the run fails.
"""
from __future__ import annotations

import contextlib
import time

from ..diagnostics import row as diagnostics_row
from ..schedules import load_schedule_state

__all__ = ["RowsInSteps"]


class RowsInSteps:
    """The rows waiting for the next step of ``sim`` (a
    :class:`~vortexsim.simulation.Simulation`), run through its output queue's
    ``writer_call``; their main-thread time goes to the run's ``window_seconds``."""

    def __init__(self, sim):
        self.sim = sim
        self.pending = []              # rows waiting for the next step: (context, job)
        self.context = None            # (name, schedule, state before) of the writer called
        self._stream = None            # the GPU's second CUDA stream for those rows

    def defer(self, job):
        """Run ``job()``, a writer's computation of a diagnostics row of the current state
        (:meth:`Simulation.diagnostics`) and what it does with it, during the next step.

        Inside :meth:`Simulation.run` (:attr:`Simulation.overlap_rows`), from a writer's ``write``: ``job`` runs
        in the next :meth:`Simulation.step` between the launch of its work and its wait for the
        device, while nothing of that step is committed (so it sees this state), on the
        GPU on a second CUDA stream (:mod:`vortexsim.simulation.rows`).  It runs before
        that instead when anything else acts first (a due callback or writer, the end of
        the run), and is given up with its schedule rolled back when the run fails or a
        second Ctrl-C cuts it short.  Elsewhere, or where a row could share device tables
        with the step (:meth:`overlap`), ``job()`` runs at once.  A ``job``
        that raises inside a step fails the run before the step commits."""
        if self.context is None or not self.sim.overlap_rows or not self.overlap():
            job()
            return
        self.pending.append((self.context, job))

    def overlap(self):
        """Whether a row may run beside a step's kernels: on the CPU always (it runs
        between the step's work and its commit); on the GPU where the row's O(N) fields
        pass has device tables of its own (the FMM's fields stages, a kernel with a
        reach, free space, beyond the direct sums' size): any table it shared with the
        step's evaluations could be read on the second stream before the step's stream
        made it."""
        model = self.sim.model
        if model.partition is not None:
            return False          # the next step drops the whole state the row reads
        if not model.device.is_gpu:
            return True
        fmm = model.summation.fmm
        if fmm is None or model.summation.box is not None:
            return False
        n = len(model.elements)             # (images only add sources: n² is a bound)
        return (fmm.field_stages()[0] is not fmm.stages
                and n * n > diagnostics_row.DIRECT_DIAGNOSTICS_PAIRS[model.device.kind])

    def run(self, window=False):
        """Run the waiting rows, in order, each as its writer's call (its schedule rolled
        back if it raises); ``window``: inside a step, on the GPU's second stream, their
        time kept apart (the run's ``window_seconds``)."""
        rows, self.pending = self.pending, []
        t0 = time.perf_counter()
        try:
            with self._window_stream() if window else contextlib.nullcontext():
                for i, (ctx, job) in enumerate(rows):
                    try:
                        self.sim.output.writer_call(*ctx, job, count=False)
                    except BaseException:
                        self.pending = rows[i + 1:]
                        self.drop()
                        raise
        finally:
            if window:
                self.sim.timings.window_seconds += time.perf_counter() - t0

    def settle(self, component=None):
        """The state that output (``component``: a writer or callback) acts on, after the
        rows waiting for it.  Where the ranks hold it split by slabs, by the component's
        ``whole_state`` (default: its ``reads_state``, else True): True the whole state
        on every rank (:meth:`vortexsim.model.VortexModel.assemble`), "root" on rank 0's
        host alone (:meth:`~vortexsim.model.VortexModel.assemble_on_root`: what rank 0
        alone writes; in files of the component's ``run_dir``, where it has one, so
        that rank 0's memory holds one part of it at a time), False none (it reads the diagnostics row, computed on the slabs,
        or no state).  Collective."""
        mode = getattr(component, "whole_state", getattr(component, "reads_state", True))
        model = self.sim.model
        # the time line says what assembling a split state takes ("assembly"), where
        # this call assembles it (not where the state is already whole where needed)
        partition = getattr(model, "partition", None)
        timed = (self.sim.timings.timed("assembly") if mode and partition is not None
                 and partition.assembles(root=mode == "root") else contextlib.nullcontext())
        with timed:
            if mode == "root":
                model.assemble_on_root(getattr(component, "run_dir", None))
            elif mode:
                model.assemble()
        self.run()

    def run_in_step(self):
        """:meth:`run` inside a step (the ``during`` of the model's time step)."""
        self.run(window=True)

    def before(self, callback):
        """Run the waiting rows before ``callback`` acts on the state after them, unless
        it says it does not read the state (``reads_state = False``: it looks at a file
        or the process), so that the rows still run beside the next step.  A state split
        by slabs over ranks is assembled for it (collective)."""
        if getattr(callback, "reads_state", True):
            self.settle()

    def drop(self):
        """Give up the rows waiting for a step (the run fails or is cut short): their
        schedules are rolled back, so that a checkpoint still owes them."""
        rows, self.pending = self.pending, []
        for (_, schedule, before), _ in reversed(rows):
            load_schedule_state(schedule, before)

    def _window_stream(self):
        """The second CUDA stream of the rows run inside a step (made once), or a null
        context on the CPU."""
        device = self.sim.model.device
        if not device.is_gpu:
            return contextlib.nullcontext()
        if self._stream is None:
            self._stream = device.xp.cuda.Stream(non_blocking=True)
        return self._stream
