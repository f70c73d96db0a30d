r"""The run: a model advanced until a stop criterion, with callbacks and output writers.

    sim = vortexsim.make_case("leapfrog")            # or Simulation(model), or
                                                     # Simulation(elements, tracers, dt=...)
    sim.run(t_end=20.0)                              # or sim.step(), sim.run(steps=10)
    sim.t, sim.iteration, sim.elements.x, sim.tracers.x, sim.diagnostics()

:class:`Simulation` (modelled on Oceananigans' ``Simulation``) owns a
:class:`~vortexsim.model.VortexModel` and the run: the stop criteria (``stop_time``,
``stop_iteration``, ``wall_time_limit``), the ordered dicts ``callbacks`` and
``output_writers`` (name → object with a schedule from :mod:`vortexsim.schedules`), and
restarts (``run(pickup=...)`` restores the model and the state of every writer, callback
and schedule).  It knows writers only through their protocol (``write(sim)``,
``schedule``, ``state_dict()``, ...); the netCDF writers are in
:mod:`vortexsim.output.writers`.  Its parts are components of their own: the output queue
(:mod:`.output_queue`, files written on the output thread of :mod:`.output_thread` while
the next steps run), the rows run inside steps (:mod:`.rows`), the timings
(:mod:`.timings`) and the progress bar (:mod:`.progress`).  The model's state and methods
(``t``, ``elements``, ``velocity()``, ``state_dict()``, ...) are reachable on the
simulation itself.

Order of operations of :meth:`Simulation.run`::

    pickup(pickup)                       # if given
    stop_time, stop_iteration ← t_end, iteration + steps   # if given
    initialize()                         # schedules, callbacks, writers
    for each writer:   if writer.schedule(sim): writer.write(sim)   # initial output
    for each callback: callback.schedule(sim)    # brought up to date, not called
    while not (t ≥ stop_time or iteration ≥ stop_iteration or wall ≥ limit):
        if request_stop() was called: finalize("interrupted"); return
            (on several ranks: on any rank, so that all stop after the same step)
        target = min(stop_time, next_time of every schedule after t)
        step(target)                     # dt shortened to land on target
            SimulationError: finalize("failed"); raise
        raise the error of a background write that failed, if any
        for each callback: if schedule is None or schedule(sim): callback(sim)
        for each writer:   if schedule is not None and schedule(sim): write(sim)
    finalize("done")
    any other exception: finalize("error"); raise
    KeyboardInterrupt (e.g. a second Ctrl-C): give up the pending writes; raise

    finalize(reason): flush the output thread (wait for every pending write);
                      finalize(sim, reason) of each callback and writer;
                      flush again

"t ≥ stop_time" and the schedules' times count as reached within a relative 1e-10
(:func:`vortexsim.schedules.due`).  ``finalize(sim, reason)`` of every callback and writer
that has one is called in order (the snapshot writer writes the final, interrupted, last
good or error state; the diagnostics writer a final row; the plot writer the plot).
Callbacks are ``func(sim)`` (plain callables: after every step) or :class:`Callback`;
writers have ``schedule`` (None: acts only in ``finalize``) and ``write(sim)``, and
optionally ``initialize(sim)``, ``finalize(sim, reason)``, ``state_dict()`` and
``load_state_dict(state)`` (what checkpoints store and :meth:`Simulation.pickup` restores).

On several ranks (the model's communicator) every rank runs the same loop and writers;
rank 0 alone writes their files (:attr:`Simulation.writes_files`: the others drop what
they submit), so that the schedules shorten the same steps and the diagnostics rows make
the same collective sums on every rank.

Output (``async_output``, default True): a writer captures what it writes on the main
thread and hands the file I/O to :meth:`Simulation.submit_output`, which queues it on the
run's output thread (one thread, submission order, at most 2 pending writes).  A write
that fails on the thread is raised at the next step, the next write or the flush of
``finalize``, and the run then ends like a failed write of a synchronous run: the output
stays owed by its schedule and the writers' state is that of the files on disk,
``finalize("error")`` checkpoints the state of the last completed step, and the write's
exception is raised.
"""
from __future__ import annotations

import logging
import math
import time

from ..diagnostics import DiagnosticsRow
from ..model import SimulationError, VortexModel
from ..schedules import due, schedule_state
from .components import Callback, Components, whole_number
from .output_queue import OutputQueue
from .progress import ProgressBar
from .rows import RowsInSteps
from .timings import GilSlices, RunTimings

logger = logging.getLogger(__name__)

__all__ = ["Simulation", "SimulationError", "Callback", "MODEL_ATTRIBUTES", "MODEL_METHODS"]

#: the model's attributes that a Simulation offers as its own (read and set)
MODEL_ATTRIBUTES = ("t", "iteration", "dt", "elements", "tracers", "groups", "config",
                    "device", "domain", "summation", "rhs", "scheme", "planner",
                    "sigma_range", "remeshing")
#: the model's methods that a Simulation offers as its own (those that return the model
#: return the simulation, so that calls chain: ``sim.load_state_dict(s).run(steps=2)``)
MODEL_METHODS = ("rates", "velocity", "state_dict", "load_state_dict", "replace_elements",
                 "remesh")


class Simulation:
    """A :class:`~vortexsim.model.VortexModel` run until a stop criterion, with callbacks
    and output writers (see the module docstring).

    Parameters
    ----------
    model : :class:`~vortexsim.model.VortexModel`; or the ``elements`` of a new one,
        followed by its ``tracers``, ``groups``, ``t0``, ``case``, ``case_params`` and
        run parameters (``**run``: ``dt`` [T] required, ... ;
        :data:`vortexsim.model.RUN_DEFAULTS`): ``Simulation(elements, tracers, dt=0.1)``
    callbacks : callables ``f(sim)`` called by :meth:`run` after every step (a bare
        :meth:`step` calls none), :class:`Callback` objects (a function and its
        schedule), or a dict name → either
    output_writers : dict name → writer (an object with ``schedule`` and ``write(sim)``,
        e.g. :mod:`vortexsim.output.writers`) or a sequence of writers
    stop_iteration : int, optional, stop :meth:`run` at this iteration
    wall_time_limit : float [s], optional, stop :meth:`run` after this much wall time
    async_output : bool, default True: during :meth:`run` the writers' files are written
        on a background thread while the next steps run; False: each write blocks

    Attributes: model, callbacks, output_writers, stop_time (default: the config's
    ``t_end``), stop_iteration, wall_time_limit, async_output, stop_reason (why the last
    run stopped), timings (:class:`~vortexsim.simulation.timings.RunTimings` of the last
    run), gil_switch_interval; and the model's :data:`MODEL_ATTRIBUTES` and
    :data:`MODEL_METHODS`.
    """

    #: [s] the interpreter's thread switch interval during :meth:`run` (None: leave it as
    #: it is; Python's default is 5 ms).  The stepping thread launches a GPU step's
    #: kernels, so it must get the GIL back at once whenever another thread (the output
    #: thread's Python between its netCDF calls) took it while the stepping thread waited
    #: on the device: with 5 ms slices each such wait could cost up to 5 ms more.
    gil_switch_interval = 2e-4
    #: whether :meth:`run` computes a due diagnostics row during the next step, beside
    #: that step's work (:meth:`defer_row`); False: at once, as any other output
    overlap_rows = True

    def __init__(self, model, tracers=None, *, callbacks=(), output_writers=None,
                 stop_iteration=None, wall_time_limit=None, async_output=True, **model_args):
        if not isinstance(model, VortexModel):
            model = VortexModel(model, tracers, **model_args)
        elif tracers is not None or model_args:
            raise TypeError("Simulation(model) takes a built VortexModel alone; pass its "
                            "tracers and run parameters to VortexModel, or pass the "
                            "elements here instead of a model.")
        self.model = model
        self.callbacks = Components("callback", callbacks)
        self.output_writers = Components("output writer", output_writers or {})
        t_end = model.parameters["t_end"]
        self.stop_time = None if t_end is None else float(t_end)
        self.stop_iteration = None if stop_iteration is None else \
            whole_number("stop_iteration", stop_iteration)
        if wall_time_limit is not None and not (math.isfinite(float(wall_time_limit))
                                                and float(wall_time_limit) > 0):
            raise ValueError(f"wall_time_limit must be a number of seconds > 0 or None, got "
                             f"{wall_time_limit!r}.")
        self.wall_time_limit = None if wall_time_limit is None else float(wall_time_limit)
        self.stop_reason = None
        self._stop_requested = False
        self.async_output = bool(async_output)
        self.timings = RunTimings()
        self.output = OutputQueue(self.timings)
        self.timings.waited = self.output.waited
        self.rows = RowsInSteps(self)
        self.diagnostics_row = DiagnosticsRow(model)
        self.writes_files = model.communicator.is_root     # of several ranks, rank 0

    # -- the run's timings, by their names -------------------------------------------
    run_timings = property(lambda self: self.timings.run_timings,
                           doc="main-thread seconds and counts of the last run's parts")
    output_timings = property(lambda self: self.timings.output_timings,
                              doc="the output thread's part of the last run, by writer")
    step_extremes = property(lambda self: self.timings.step_extremes,
                             doc="the last run's first and slowest step")

    # -- stepping -----------------------------------------------------------------
    def step(self, t_end=None):
        """Advance the model by one step of ``dt``, shortened so as not to pass ``t_end``
        (:meth:`vortexsim.model.VortexModel.time_step`).

        Raises :class:`SimulationError` (state unchanged) when a safety check fails.
        Inside :meth:`run`, the diagnostics rows waiting for this step
        (:meth:`defer_row`) run between the launch of its work and its one transfer.
        """
        model = self.model
        dt = model.dt
        if t_end is not None:
            remaining = float(t_end) - model.t
            if remaining <= 0:
                raise ValueError(f"t_end = {t_end} is not after the current time t = "
                                 f"{model.t}.")
            if remaining < dt * (1 + 1e-9):
                dt = remaining
        model.time_step(dt, during=self.rows.run_in_step if self.rows.pending else None)
        return self

    def run(self, t_end=None, steps=None, progress=None, *, pickup=None):
        """Step until a stop criterion is met; callbacks and output writers act on their
        schedules after each step, and each step is shortened so as to land exactly on
        the stop time and on the next time of every time-based schedule (the order of
        operations is in the module docstring).

        Parameters
        ----------
        t_end : float [T], optional, stop at this time (``stop_time``)
        steps : int, optional, stop after this many more steps (``stop_iteration =
            iteration + steps``).  Given ``t_end`` or ``steps``, both criteria are set
            from them (None where not given); with neither, the criteria stay as they
            are: the config's ``t_end``, those set on the simulation, or those restored
            by ``pickup``.  ``wall_time_limit`` [s] always applies when set.
        progress : bool, a progress bar (t, steps/s, ETA); default: the config's
        pickup : continue from a checkpoint first (:meth:`pickup`): a snapshot path,
            ``"latest"``/True or an iteration (read by the output writer with
            ``read_checkpoint``), or a dict (:meth:`checkpoint_state`, or a
            :meth:`state_dict` alone).  ``run(pickup=p)`` is ``pickup(p); run()``.

        Returns self, once every file of the run is on disk; :attr:`stop_reason` says
        why the run stopped: ``"stop_time"``, ``"stop_iteration"``,
        ``"wall_time_limit"`` or ``"interrupted"`` (after :meth:`request_stop`).

        Raises ValueError("No stopping criterion ...") when nothing would stop the run,
        :class:`SimulationError` when a step fails a safety check (the simulation stays
        at its last good state, which the writers have checkpointed), and the exception
        of a failed file write (after the ``"error"`` checkpoint).
        """
        if pickup is not None:
            self.pickup(pickup)
        self._set_stop(t_end, steps)
        show = self.model.parameters["progress"] if progress is None else progress
        t_setup = time.perf_counter()
        # the writers import their libraries here, before the first step (on a thread
        # beside the steps, Python holding the GIL would hold up their kernel launches)
        self.initialize()
        self.timings.setup_seconds = time.perf_counter() - t_setup
        self.stop_reason = None
        self.timings.start()
        switch = GilSlices(self.gil_switch_interval)
        self.output.open(self.async_output)
        start, n0, t_start = time.perf_counter(), self.iteration, self.t
        bar = ProgressBar(False, self)
        try:
            for name, writer in self.output_writers.items():   # the state at the start
                self._write_if_due(name, writer)
            for callback in self.callbacks.values():
                if callback.schedule is not None:
                    callback.schedule(self)
            bar = ProgressBar(show, self)
            while not self._stop_criterion(start):
                if self.model.communicator.any(self._stop_requested):   # any rank asked
                    self.stop_reason = "interrupted"
                    bar.close()
                    self._finalize("interrupted")
                    self.output.close()
                    self.timings.log(time.perf_counter() - start)
                    return self
                try:
                    self._timed_step()
                except SimulationError:
                    bar.close()
                    self._finalize("failed")
                    raise
                self.output.poll()               # a background write that failed
                for name, callback in self.callbacks.items():
                    if callback.schedule is None or callback.schedule(self):
                        self.rows.before(callback)   # it acts on the state after them
                        with self.timings.timed(name):
                            callback(self)
                for name, writer in self.output_writers.items():
                    self._write_if_due(name, writer)
                bar.update(self)
            bar.close()      # (a stop requested during the last step: the run is complete)
            self._finalize("done")
        except (SimulationError, KeyboardInterrupt):
            bar.close()
            raise
        except Exception:
            bar.close()
            self._finalize("error")
            raise
        finally:        # after an interruption (a second Ctrl-C): gives up pending writes
            try:
                self.rows.drop()
                self.output.close()
            finally:        # even when a Ctrl-C cuts that short
                switch.restore()
        wall = time.perf_counter() - start
        done = self.iteration - n0
        if done:
            logger.info("ran %d steps (t %.6g → %.6g) in %.3g s: %.3g steps/s, %.3g element "
                        "steps/s", done, t_start, self.t, wall, done / wall,
                        done * len(self.elements) / wall)
        self.timings.log(wall, self.model.device, len(self.elements))
        return self

    def _set_stop(self, t_end, steps):
        """The stop criteria of :meth:`run` from its ``t_end`` and ``steps``."""
        if steps is not None and (int(steps) != steps or steps < 0):
            raise ValueError(f"steps must be an integer >= 0, got {steps!r}.")
        if t_end is not None and not math.isfinite(float(t_end)):
            raise ValueError(f"t_end must be finite, got {t_end!r}.")
        if t_end is not None or steps is not None:
            self.stop_time = None if t_end is None else float(t_end)
            self.stop_iteration = None if steps is None else self.iteration + int(steps)
        if self.stop_time is None and self.stop_iteration is None and \
                self.wall_time_limit is None:
            raise ValueError("No stopping criterion: pass t_end or steps (or set t_end in the "
                             "config, or stop_time, stop_iteration or wall_time_limit on the "
                             "simulation).")

    def _timed_step(self):
        """One step of the run towards its next target, timed as "steps" (less the rows
        run inside it, which count as their writer's time)."""
        steps = self.timings.run_timings["steps"]
        before, rows = steps[0], self.timings.window_seconds
        with self.timings.timed("steps"):
            self.step(self._next_target())
        steps[0] -= self.timings.window_seconds - rows
        self.timings.note_step(steps[0] - before, self.iteration)

    def _stop_criterion(self, start):
        """Set and return :attr:`stop_reason` when a stop criterion is met (else None)."""
        if self.stop_iteration is not None and self.iteration >= self.stop_iteration:
            self.stop_reason = "stop_iteration"
        elif self.stop_time is not None and due(self.t, self.stop_time):
            self.stop_reason = "stop_time"
        elif self.wall_time_limit is not None and self.model.communicator.any(
                time.perf_counter() - start >= self.wall_time_limit):
            self.stop_reason = "wall_time_limit"
        return self.stop_reason

    def _next_target(self):
        """The time the next step must not pass: the stop time and the next time of every
        time-based schedule (None: no such time)."""
        target = self.stop_time
        for comp in (*self.callbacks.values(), *self.output_writers.values()):
            t_next = getattr(comp.schedule, "next_time", None)
            if t_next is not None and t_next > self.t and (target is None or t_next < target):
                target = t_next
        return target

    def _finalize(self, reason):
        """Flush the pending writes, ``finalize(sim, reason)`` of every callback and writer,
        flush again.  With ``reason == "error"`` nothing raises (the run's own exception
        is the one to report): failures are logged."""
        self._stop_requested = False      # a request is spent by the run that ends here
        # (an error may be one rank's: no collective then)
        (self.rows.drop if reason == "error" else self.rows.run)()
        self._flush_after(reason)
        for name, comp in (*self.callbacks.items(), *self.output_writers.items()):
            finalize = getattr(comp, "finalize", None)
            if finalize is None:
                continue
            if reason != "error":
                self.rows.settle(comp)    # the state it acts on (collective)
                with self.timings.timed(name), self.output.calling(name):
                    finalize(self, reason)
                continue
            try:                      # the run's own exception is the one to report
                with self.output.calling(name):
                    finalize(self, reason)
            except Exception as exc:  # noqa: BLE001
                logger.error("%s could not finalize after the error: %s",   # (a detail
                             type(comp).__name__, exc, extra={"file_only": True})  # of it)
        self._flush_after(reason)

    def _flush_after(self, reason):
        try:
            self.flush_output()
        except Exception as exc:  # noqa: BLE001 - the run's own exception is the one to report
            if reason != "error":
                raise
            logger.error("an output write failed after the error: %s", exc,
                         extra={"file_only": True})      # a detail of the run's error

    def _write_if_due(self, name, writer):
        """``writer.write(self)`` when its schedule is due; a write that raises leaves the
        schedule as it was (a checkpoint then still owes that output): here, or through
        :meth:`submit_output` when the write fails on the output thread."""
        if writer.schedule is None:
            return
        before = schedule_state(writer.schedule)
        if writer.schedule(self):
            self.rows.settle(writer)              # a writer acts on the state after them
            self.rows.context = (name, writer.schedule, before)
            try:
                self.output.writer_call(name, writer.schedule, before,
                                        lambda: writer.write(self))
            finally:
                self.rows.context = None

    # -- the output protocol for writers ----------------------------------------------
    def submit_output(self, func, undo=None, *, defer=False):
        """Write files: ``func()`` runs on the run's output thread (inside :meth:`run`, with
        :attr:`async_output`), after every write submitted before it, or at once;
        ``undo()`` forgets what the writer recorded if the write fails; ``defer=True``
        lets a full rewrite wait for the next (:meth:`OutputQueue.submit` says how);
        dropped where another rank writes the files (:attr:`writes_files`)."""
        if self.writes_files:
            self.output.submit(func, undo, defer=defer)

    def flush_output(self):
        """Write the deferred writes and wait until every file handed to
        :meth:`submit_output` is on disk; raises the exception of a write that failed.
        Nothing to do outside :meth:`run`."""
        self.output.flush()

    def defer_row(self, job):
        """Run ``job()``, a writer's computation of a diagnostics row of the current state
        (:meth:`diagnostics`) and what it does with it, during the next step, beside its
        work, or at once where it cannot (:meth:`RowsInSteps.defer` says when)."""
        self.rows.defer(job)

    def diagnostics(self):
        """The diagnostics row of the current state (host values):
        :class:`vortexsim.diagnostics.DiagnosticsRow` says what it holds (collective)."""
        return self.diagnostics_row()

    def row_sums(self):
        """The :class:`vortexsim.diagnostics.RowSums` of the elements and their ring groups."""
        return self.diagnostics_row.row_sums()

    # -- stop requests, start-up and restarts --------------------------------------
    def request_stop(self):
        """Ask the running :meth:`run` to stop after the step in progress: the writers
        then checkpoint (``finalize(sim, "interrupted")``) and ``run`` returns with
        ``stop_reason == "interrupted"``.  Safe to call from a signal handler."""
        self._stop_requested = True

    def initialize(self):
        """Prepare a run: ``initialize(sim)`` of every callback's and writer's schedule and
        of the callbacks and writers themselves (fill in start times, open or resume
        files).  Idempotent; :meth:`run` and :meth:`pickup` call it."""
        for comp in (*self.callbacks.values(), *self.output_writers.values()):
            for obj in (comp.schedule, comp):
                init = getattr(obj, "initialize", None)
                if init is not None:
                    init(self)
        return self

    def pickup(self, source):
        """Continue from a checkpoint: restore the model's state (``load_state_dict``),
        the stop criteria and the state of every callback, output writer and schedule
        (:meth:`load_run_state_dict`), then :meth:`initialize`.

        ``source``: a dict ``{"state": ..., "run": ...}`` (:meth:`checkpoint_state`) or a
        ``state_dict()`` alone (the writers keep their state); anything else (a
        snapshot path, ``"latest"`` or True, an iteration, a read snapshot) is handed to
        the first output writer with ``read_checkpoint(source)``, which returns such a
        dict (:class:`vortexsim.output.writers.SnapshotWriter`).
        """
        if isinstance(source, dict):
            checkpoint = source if "state" in source else {"state": source}
        else:
            readers = [w for w in self.output_writers.values() if hasattr(w, "read_checkpoint")]
            if not readers:
                raise ValueError(f"pickup={source!r} needs an output writer that reads "
                                 "checkpoints (read_checkpoint(source), e.g. vortexsim.output."
                                 "writers.SnapshotWriter); attach one, or pass a state dict.")
            checkpoint = readers[0].read_checkpoint(source)
        self.model.load_state_dict(checkpoint["state"])
        if checkpoint.get("run") is not None:
            self.load_run_state_dict(checkpoint["run"])
        self.initialize()
        logger.info("picked up t = %.10g, iteration %d", self.t, self.iteration)
        return self

    def checkpoint_state(self):
        """Everything a restart needs: ``{"state": state_dict(), "run": run_state_dict()}``."""
        return {"state": self.model.whole_state_dict(), "run": self.run_state_dict()}

    def run_state_dict(self):
        """The run loop's state: the stop criteria and ``state_dict()`` of every callback and
        output writer (with their schedules' states), by name."""
        def states(components):
            return {name: c.state_dict() for name, c in components.items()
                    if hasattr(c, "state_dict")}
        return {"stop_time": self.stop_time, "stop_iteration": self.stop_iteration,
                "output_writers": states(self.output_writers),
                "callbacks": states(self.callbacks)}

    def load_run_state_dict(self, run):
        """Restore a :meth:`run_state_dict`: the stop criteria it holds, and each callback's
        and writer's state under its name (names it lacks keep their state)."""
        if "stop_time" in run:
            self.stop_time = None if run["stop_time"] is None else float(run["stop_time"])
        if "stop_iteration" in run:
            self.stop_iteration = None if run["stop_iteration"] is None else \
                int(run["stop_iteration"])
        for key, components in (("output_writers", self.output_writers),
                                ("callbacks", self.callbacks)):
            for name, state in (run.get(key) or {}).items():
                comp = components.get(name)
                if comp is None:
                    logger.info("pickup: no %s named %r here; its state is ignored",
                                components.kind, name)
                elif hasattr(comp, "load_state_dict"):
                    comp.load_state_dict(state)
        return self


def _model_attribute(name):
    return property(lambda sim: getattr(sim.model, name),
                    lambda sim, value: setattr(sim.model, name, value),
                    doc=f"the model's ``{name}`` (:class:`vortexsim.model.VortexModel`)")


def _model_method(name):
    method = getattr(VortexModel, name)

    def call(sim, *args, **kwargs):
        out = getattr(sim.model, name)(*args, **kwargs)
        return sim if out is sim.model else out
    call.__name__, call.__qualname__ = name, f"Simulation.{name}"
    call.__doc__ = f"The model's :meth:`~vortexsim.model.VortexModel.{name}`.\n\n{method.__doc__}"
    return call


for _name in MODEL_ATTRIBUTES:
    setattr(Simulation, _name, _model_attribute(_name))
for _name in MODEL_METHODS:
    setattr(Simulation, _name, _model_method(_name))
del _name
