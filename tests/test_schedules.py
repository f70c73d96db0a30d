"""Schedules (vortexsim/schedules.py): when callbacks and writers act, their next times,
their state round trip, the combinators."""
from __future__ import annotations

import math
import types

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vortexsim import schedules as S
from vortexsim.schedules import (AndSchedule, IterationInterval, OrSchedule, TimeInterval,
                                 WallTimeInterval, all_of, any_of, due)

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=1e-6, max_value=1e3, allow_nan=False, allow_infinity=False)


def _sim(t=0.0, iteration=0):
    return types.SimpleNamespace(t=t, iteration=iteration)


@given(finite, finite)
def test_due_is_the_run_loops_tolerance(t, target):
    """The rule of the former CLI loop, bit for bit: t >= target - 1e-10 max(1, |target|)."""
    assert due(t, target) == (t >= target - 1e-10 * max(1.0, abs(target)))
    assert due(target, target)


@settings(max_examples=50, deadline=None)
@given(positive, finite, st.integers(min_value=1, max_value=40))
def test_time_interval_fires_once_at_each_landed_time(interval, t0, n):
    """Landing exactly on next_time (what the loop does) fires each t0 + k·interval once
    (intervals longer than the tolerance of due())."""
    assume(interval > 1e-8 * max(1.0, abs(t0) + n * interval))
    s = TimeInterval(interval)
    sim = _sim(t0)
    s.initialize(sim)
    assert s.t0 == t0 and s.next_time == t0
    fired = []
    for _ in range(n):
        assert s(sim)                       # due now
        fired.append(sim.t)
        assert not s(sim)                   # once only
        sim.t = s.next_time                 # the loop lands the step on it
    assert fired == [t0 + k * interval for k in range(n)]   # t0 + k·interval, no drift
    assert s.next_index == n


def test_time_interval_is_not_due_just_before_and_due_within_the_tolerance():
    s = TimeInterval(0.1, t0=0.0, next_index=3)
    target = 3 * 0.1
    assert s.next_time == target
    assert not s(_sim(target - 1e-6))
    assert s.next_index == 3
    assert s(_sim(target - 0.5e-10))
    assert s.next_index == 4


def test_time_interval_state_round_trip():
    a = TimeInterval(0.25)
    sim = _sim(1.5)
    a(sim)                                  # t0 = 1.5, fires, next index 1
    state = a.state_dict()
    assert state == {"t0": 1.5, "interval": 0.25, "next_index": 1}
    b = TimeInterval(0.25).load_state_dict(state)
    assert b.next_time == a.next_time == 1.75 and b.state_dict() == state


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "1"])
def test_bad_intervals_are_refused(bad):
    with pytest.raises(ValueError, match="must be"):
        TimeInterval(bad)
    with pytest.raises(ValueError, match="must be"):
        WallTimeInterval(bad)


@given(st.integers(min_value=1, max_value=50), st.integers(min_value=0, max_value=200),
       st.integers(min_value=-100, max_value=100))
def test_iteration_interval(interval, iteration, offset):
    s = IterationInterval(interval, offset=offset)
    assert s(_sim(iteration=iteration)) == (iteration % interval == offset % interval)
    assert s.next_time is None and s.state_dict() == {}


def test_iteration_interval_needs_a_positive_integer():
    with pytest.raises(ValueError, match="positive integer"):
        IterationInterval(2.5)
    with pytest.raises(ValueError, match="positive integer"):
        IterationInterval(0)


def test_wall_time_interval(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(S.time, "perf_counter", lambda: clock[0])
    s = WallTimeInterval(10.0)
    sim = _sim()
    s.initialize(sim)
    assert not s(sim) and s.next_time is None
    clock[0] = 109.0
    assert not s(sim)
    clock[0] = 110.5
    assert s(sim)
    clock[0] = 115.0
    assert not s(sim)                       # 10 s from the last actuation
    clock[0] = 120.5
    assert s(sim)


def test_combinators_ask_every_part_and_give_the_earliest_time():
    a, b = TimeInterval(0.3, t0=0.0), TimeInterval(0.2, t0=0.0)
    either = a | b
    assert isinstance(either, OrSchedule) and either.next_time == 0.0
    assert either(_sim(0.0))
    assert a.next_index == b.next_index == 1     # both advanced (no short circuit)
    assert either.next_time == 0.2
    assert either(_sim(0.2)) and a.next_index == 1 and b.next_index == 2
    both = all_of(TimeInterval(0.5, t0=0.0), IterationInterval(2))
    assert isinstance(both, AndSchedule)
    assert both(_sim(0.0, iteration=0))
    assert not both(_sim(0.5, iteration=3))      # time due, iteration not: no
    assert both.schedules[0].next_index == 2     # ... but the time part moved on
    assert (IterationInterval(2) & IterationInterval(3)).next_time is None
    assert any_of(IterationInterval(2), IterationInterval(3))(_sim(iteration=3))


def test_combined_state_round_trip():
    s = any_of(TimeInterval(0.3), TimeInterval(0.7), IterationInterval(5))
    s.initialize(_sim(1.0))
    s(_sim(1.0))
    state = s.state_dict()
    t = any_of(TimeInterval(0.3), TimeInterval(0.7), IterationInterval(5)).load_state_dict(state)
    assert t.state_dict() == state and t.next_time == s.next_time == 1.3
    with pytest.raises(ValueError, match="parts"):
        any_of(TimeInterval(0.3)).load_state_dict(state)
    with pytest.raises(TypeError, match="schedules"):
        any_of(TimeInterval(0.3), 5)
