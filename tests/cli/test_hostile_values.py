"""Hostile values in case files: refused before anything is built or written.

Every key of every shipped case file is set, in a copy of that file, to values that no
run can use (not finite, of the wrong kind, beyond the range that the parameter table
states for it) and to the extremes of that range.  ``vortexsim run`` must then either
refuse in one line with exit code 2 and leave no run directory, or (a value inside the
range) run its one step and exit 0: never a traceback, a failure after the run has
started (exit 1), or a hang.  The one exit 1 allowed is ``max_speed``, the user's own
blow-up bound: below the flow's speed it stops the first step, as documented (the
last good state written).  The table's ranges are read from
:meth:`vortexsim.config.Parameter.limits`; whether a value is outside them is decided
here, independently of the code that checks it.
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import tempfile

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vortexsim.cli import main
from vortexsim.cli.common import case_file, case_files_dir
from vortexsim.config import PARAMETER_TABLE, load_case_file, to_toml

CASES = sorted(name[:-5] for name in os.listdir(case_files_dir()) if name.endswith(".toml"))
#: the periodic cases build a lattice of n³ elements: n = 16 is the smallest that PSE of
#: order 4 (isotropic_turbulence) accepts
PERIODIC = {"taylor_green": {"n": 8}, "isotropic_turbulence": {"n": 16}}
RING = {"n_phi": 6, "layers": 1, "tracers_per_ring": 4}
#: a bound on what an accepted value may cost: larger runs are refused by the memory guard
MAX_MEMORY = "512MB"

#: values no parameter accepts whatever its range (or only the widest ones)
GENERIC = (math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, -5e-324, -1, 10 ** 30,
           -(10 ** 30), 2 ** 63, "", "1.0", True, [1.0])


def _tiny(case):
    return PERIODIC.get(case, RING)


def _file_params(case):
    return load_case_file(case_file(case))[1]


def outside(p, value):
    """True when ``value`` is not one that parameter ``p`` accepts by its kind and the
    range the table states; None for a text, which only the parameter's own check (a
    list of names) can tell."""
    if p.auto and value == "auto":
        return False
    if p.kind == "bool":
        return not isinstance(value, bool)
    if p.kind == "str":
        return True if not isinstance(value, str) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    if isinstance(value, float) and math.isnan(value):
        return True               # ±inf: beyond every range but max_speed's (no bound)
    if p.kind == "int" and isinstance(value, float) and not (
            math.isfinite(value) and value == int(value)):
        return True
    low, high = p.limits()
    size = abs(value) if p.bound == "nonzero" else value
    return not (low <= size and (size < high if p.high_open else size <= high))


def edges(p):
    """The extremes of the range of ``p`` and the values just beyond them."""
    low, high = p.limits()
    if low is None:
        return ()
    if p.kind == "int":
        return (low - 1, low, high, high + 1)
    return (math.nextafter(low, -math.inf), low, math.nextafter(high, -math.inf), high,
            math.nextafter(high, math.inf), -high)


def run_mutated(case, key, value):
    """(exit code, non-empty stderr lines, whether the run directory exists) of ``vortexsim
    run`` of a copy of the case file with ``key = value``, one step, on the CPU."""
    params = {**_file_params(case), **_tiny(case), "plot": False, key: value}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{case}.toml")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(to_toml(case, params))
        out = os.path.join(tmp, "run")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["run", path, "--device", "cpu", "-qq", "--steps", "1",
                         "--max-memory", MAX_MEMORY, "--out", out])
        return code, [line for line in err.getvalue().splitlines() if line.strip()], \
            os.path.exists(out)


def check_outcome(case, key, value):
    p = PARAMETER_TABLE[key]
    code, lines, left = run_mutated(case, key, value)
    event(f"exit {code}")
    what = f"{case}: {key} = {value!r}"
    if outside(p, value):
        assert code == 2, f"{what} outside the table's range: exit {code}, {lines}"
    if key == "max_speed" and code == 1:    # the blow-up bound itself, below the flow's speed
        assert "exceeds the bound max_speed" in lines[-1], (what, lines)
        return
    assert code in (0, 2), f"{what}: exit {code} (a failure after the start), {lines}"
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("vortexsim: error: "), (what, lines)
        assert not left, f"{what} was refused but left a run directory"
    else:
        assert left and not lines, (what, lines)


def test_every_key_of_every_case_file_is_in_the_parameter_table():
    for case in CASES:
        assert set(_file_params(case)) <= set(PARAMETER_TABLE), case


@pytest.mark.parametrize("case", CASES)
def test_every_value_outside_the_table_is_refused_in_one_line_before_anything_is_written(case):
    """Every key of the case file, each value that its range or kind excludes."""
    refused = 0
    for key in _file_params(case):
        p = PARAMETER_TABLE[key]
        for value in (*GENERIC, *edges(p)):
            if outside(p, value):
                code, lines, left = run_mutated(case, key, value)
                assert code == 2 and len(lines) == 1 and not left, (case, key, value, lines)
                assert lines[0].startswith("vortexsim: error: ") and key in lines[0], lines
                refused += 1
    assert refused > 100


#: values that failed after the run had started, or with a traceback, before the table
#: stated ranges and the derived constraints were checked at start-up
FORMER_FAILURES = [
    ("single_ring", "n_phi", 1e308),
    ("taylor_green", "nu", 9223372036854775807),
    ("taylor_green", "nu", 1000.0),               # the field diffused away in one step
    ("taylor_green", "box", 1e12),                # a lattice of 10^36 nodes
    ("taylor_green", "remesh_spacing", 1e-12),
    ("taylor_green", "remesh_spacing", 5e-324),
    ("taylor_green", "tol", 5e-324),
    ("taylor_green", "n", 1e308),
    ("isotropic_turbulence", "nu", 1e12),              # PSE unstable for this dt
    ("isotropic_turbulence", "energy", 1e12),          # dt far beyond the flow's time scale
    ("isotropic_turbulence", "seed", 123456789012345678901234567890),
]


@pytest.mark.parametrize("case, key, value", FORMER_FAILURES)
def test_values_that_failed_late_are_refused_at_start_up(case, key, value):
    code, lines, left = run_mutated(case, key, value)
    assert code == 2 and len(lines) == 1 and not left, lines
    assert lines[0].startswith("vortexsim: error: ")


def test_a_core_beyond_pses_reach_is_refused_at_start_up():
    """remesh_overlap = 2.5 with PSE (the isotropic case's defaults before it took the
    lattice diffusion) failed at the first remeshing: refused when the model is built,
    naming the core the remeshing sets."""
    import vortexsim
    with pytest.raises(ValueError, match="remesh_overlap"):
        vortexsim.make_case("isotropic_turbulence", n=16, viscous="pse", remesh_overlap=2.5,
                            progress=False)


def test_a_decaying_periodic_field_runs_to_the_end():
    """nu inside the bounds but strong enough to diffuse the Taylor-Green vortex to
    round-off within the run: it runs (Σα's round-off does not outlive the field)."""
    code, lines, left = run_mutated("taylor_green", "nu", 100.0)
    assert code == 0 and left and not lines


@st.composite
def mutations(draw):
    """(case, key, value): any case, any key of its file, a hostile or extreme value."""
    case = draw(st.sampled_from(CASES))
    key = draw(st.sampled_from(sorted(_file_params(case))))
    p = PARAMETER_TABLE[key]
    hostile = st.one_of(
        st.sampled_from((*GENERIC, *edges(p))),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(max_value=-1), st.integers(min_value=10 ** 7),
        st.text(max_size=8), st.booleans(),
        st.lists(st.integers(), max_size=2))
    inside = st.nothing()
    if p.kind == "float":         # log-uniform over the decades of the range
        low, high = p.limits()
        decades = st.floats(math.log10(max(low, 1e-12)) if low > 0 else -12.0,
                            math.log10(min(high, 1e12)))
        signs = st.sampled_from((1.0, -1.0) if low < 0 else (1.0,))
        inside = st.tuples(decades, signs).map(lambda t: t[1] * 10.0 ** t[0]).filter(
            lambda v: not outside(p, v))
    value = draw(st.one_of(hostile, inside))
    if case == "isotropic_turbulence" and not outside(p, value):
        value = math.nan      # an accepted value builds a 16^3 field: seconds a run
    return case, key, value


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(mutations())
def test_hostile_values_are_refused_in_one_line_or_run(mutation):
    check_outcome(*mutation)
