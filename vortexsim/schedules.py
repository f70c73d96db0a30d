r"""Schedules: *when* a callback or output writer acts, kept apart from *what* it does.

A schedule is a small callable ``schedule(sim) -> bool``, asked once after every step
(and, for output writers, once at the start of a run) whether its writer or callback
acts now.  Asking may advance the schedule (a :class:`TimeInterval` moves on to its next
time when it answers True), so ask each schedule once per step.  Where a schedule fires
at known simulated times it tells the next one, :attr:`Schedule.next_time`, and the run
loop shortens the step so as to land on it exactly.  Every schedule has ``state_dict()``
and ``load_state_dict()`` (what a checkpoint stores and a restart restores) and
``initialize(sim)`` (called at the start of every run; idempotent).

::

    TimeInterval(0.5)                    # t0, t0 + 0.5, t0 + 1.0, ... (t0: the run's start)
    IterationInterval(10)                # iterations 0, 10, 20, ...
    WallTimeInterval(600.0)              # every 10 minutes of wall-clock time
    TimeInterval(0.5) & IterationInterval(2), any_of(TimeInterval(1.0), WallTimeInterval(60))

Times are ``t0 + k·interval`` (k an integer: no accumulated rounding), and a time counts
as reached when ``t ≥ target − 1e-10·max(1, |target|)`` (:func:`due`).

Modelled on Oceananigans' ``Utils/schedules.jl``.  This module imports nothing from
vortexsim (the bottom layer, like :mod:`vortexsim.backend`).
"""
from __future__ import annotations

import math
import time

__all__ = ["DUE_RTOL", "due", "schedule_state", "load_schedule_state", "Schedule", "TimeInterval", "IterationInterval",
           "WallTimeInterval", "AndSchedule", "OrSchedule", "any_of", "all_of"]

#: relative tolerance of :func:`due`
DUE_RTOL = 1e-10


def due(t, target):
    """True when time ``t`` [T] has reached ``target`` [T], within ``DUE_RTOL·max(1, |target|)``."""
    return t >= target - DUE_RTOL * max(1.0, abs(target))


def schedule_state(schedule):
    """``{"schedule": schedule.state_dict()}``, or {} for a schedule without state: the
    state of a callback or writer whose only state is its schedule's."""
    state = getattr(schedule, "state_dict", None)
    return {"schedule": state()} if state is not None else {}


def load_schedule_state(schedule, state):
    """Restore what :func:`schedule_state` returned into ``schedule``."""
    if "schedule" in state and hasattr(schedule, "load_state_dict"):
        schedule.load_state_dict(state["schedule"])


def _positive(name, value, kind=float):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value) and value > 0
    if not ok or (kind is int and int(value) != value):
        what = "a positive integer" if kind is int else "a finite number > 0"
        raise ValueError(f"{name} must be {what}, got {value!r}.")
    return kind(value)


class Schedule:
    """Base of the schedules: ``schedule(sim) -> bool`` plus the hooks below.

    Combine schedules with ``a & b`` (:class:`AndSchedule`) and ``a | b``
    (:class:`OrSchedule`).
    """

    #: the next simulated time [T] at which this schedule fires, or None (not time based)
    next_time = None

    def initialize(self, sim):
        """Called at the start of every run (after a pickup); fills in what the
        constructor left open, e.g. the start time.  Idempotent."""

    def __call__(self, sim):  # pragma: no cover - abstract
        raise NotImplementedError

    def state_dict(self):
        """What a checkpoint stores to continue this schedule (a dict of plain values)."""
        return {}

    def load_state_dict(self, state):
        """Restore a :meth:`state_dict`; returns self."""
        return self

    def __and__(self, other):
        return AndSchedule(self, other)

    def __or__(self, other):
        return OrSchedule(self, other)


class TimeInterval(Schedule):
    """Fires at the simulated times ``t0 + k·interval``, k = 0, 1, 2, ...

    Parameters
    ----------
    interval : float [T], > 0
    t0 : float [T] or None; None: the time of the simulation when the first run starts
    next_index : int, k of the next time (the schedule's state)

    A call returns True when the next time is reached (:func:`due`) and then moves on
    to the following one; the run loop lands steps on :attr:`next_time`.
    """

    def __init__(self, interval, t0=None, next_index=0):
        self.interval = _positive("TimeInterval interval", interval)
        if t0 is not None and not math.isfinite(float(t0)):
            raise ValueError(f"TimeInterval t0 must be finite or None, got {t0!r}.")
        self.t0 = None if t0 is None else float(t0)
        self.next_index = int(next_index)

    @property
    def next_time(self):
        """``t0 + next_index·interval`` [T] (None before the start time is known)."""
        if self.t0 is None:
            return None
        return self.t0 + self.next_index * self.interval

    def initialize(self, sim):
        if self.t0 is None:
            self.t0 = float(sim.t)

    def __call__(self, sim):
        self.initialize(sim)
        if due(sim.t, self.next_time):
            self.next_index += 1
            return True
        return False

    def state_dict(self):
        return {"t0": self.t0, "interval": self.interval, "next_index": self.next_index}

    def load_state_dict(self, state):
        self.interval = _positive("TimeInterval interval", state.get("interval", self.interval))
        self.t0 = None if state.get("t0") is None else float(state["t0"])
        self.next_index = int(state.get("next_index", 0))
        return self

    def __repr__(self):
        return (f"TimeInterval({self.interval!r}, t0={self.t0!r}, "
                f"next_index={self.next_index})")


class IterationInterval(Schedule):
    """Fires at the iterations ``offset + k·interval`` (iteration ``n`` with
    ``n % interval == offset % interval``); stateless."""

    def __init__(self, interval, offset=0):
        self.interval = _positive("IterationInterval interval", interval, int)
        self.offset = int(offset)

    def __call__(self, sim):
        return sim.iteration % self.interval == self.offset % self.interval

    def __repr__(self):
        return f"IterationInterval({self.interval}, offset={self.offset})"


class WallTimeInterval(Schedule):
    """Fires when ``interval`` seconds of wall-clock time have passed since it last fired
    (or since the start of the first run).  Not time-step aligned; nothing of it is
    checkpointed (a restart starts a new wall clock)."""

    def __init__(self, interval):
        self.interval = _positive("WallTimeInterval interval", interval)
        self._last = None

    def initialize(self, sim):
        if self._last is None:
            self._last = time.perf_counter()

    def __call__(self, sim):
        self.initialize(sim)
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            return True
        return False

    def __repr__(self):
        return f"WallTimeInterval({self.interval!r})"


class _Combined(Schedule):
    _join = None

    def __init__(self, *schedules):
        if not schedules:
            raise ValueError(f"{type(self).__name__} needs at least one schedule.")
        for s in schedules:
            if not callable(s):
                raise TypeError(f"{type(self).__name__} takes schedules (callables "
                                f"schedule(sim) -> bool), got {type(s).__name__}.")
        self.schedules = tuple(schedules)

    @property
    def next_time(self):
        """The earliest next time of the parts (None when no part is time based)."""
        times = [s.next_time for s in self.schedules if getattr(s, "next_time", None) is not None]
        return min(times) if times else None

    def initialize(self, sim):
        for s in self.schedules:
            if hasattr(s, "initialize"):
                s.initialize(sim)

    def __call__(self, sim):
        # every part is asked (no short circuit), so that each advances its own state
        return self._join([bool(s(sim)) for s in self.schedules])

    def state_dict(self):
        return {"schedules": [s.state_dict() if hasattr(s, "state_dict") else {}
                              for s in self.schedules]}

    def load_state_dict(self, state):
        parts = state.get("schedules", [])
        if len(parts) != len(self.schedules):
            raise ValueError(f"{type(self).__name__} state has {len(parts)} parts; this "
                             f"schedule has {len(self.schedules)}.")
        for s, st in zip(self.schedules, parts):
            if hasattr(s, "load_state_dict"):
                s.load_state_dict(st)
        return self

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(map(repr, self.schedules))})"


class AndSchedule(_Combined):
    """Fires when all its schedules fire (each is asked every time)."""

    _join = staticmethod(all)


class OrSchedule(_Combined):
    """Fires when any of its schedules fires (each is asked every time)."""

    _join = staticmethod(any)


def any_of(*schedules):
    """:class:`OrSchedule` of ``schedules``."""
    return OrSchedule(*schedules)


def all_of(*schedules):
    """:class:`AndSchedule` of ``schedules``."""
    return AndSchedule(*schedules)
