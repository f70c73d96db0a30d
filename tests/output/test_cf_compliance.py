"""The files of a run against the CF conventions they declare (issue 18): the IOOS
compliance checker, ``cf:1.10``, on every file kind of a tiny ring run and a tiny periodic
run (snapshots, diagnostics.nc, spectra.nc, initial_field.nc).

Errors are the checker's high-priority failures (its "Errors" section); warnings (e.g.
the recommended T, Z, Y, X dimension order, which particle arrays do not have) are
allowed.  One error is known and allowed for now: the ``time`` coordinate holds the
case's nondimensional time T, and CF (§4.4, §3.1) wants a time coordinate in
``<unit> since <epoch>``, which xarray would decode into datetimes (see
``_TIME_UNITS_ERRORS``); everything else must pass.
"""
from __future__ import annotations

import pytest

pytest.importorskip("compliance_checker")

from vortexsim.cli import main  # noqa: E402

#: the errors of the nondimensional time coordinate (units "T", not "<unit> since <epoch>")
_TIME_UNITS_ERRORS = {"time does not have correct time units",
                      "time must be in a valid units format <unit> since <epoch> not T"}


def _errors(path):
    """The messages of the checker's errors (failed high-priority checks) on ``path``."""
    from compliance_checker.runner import CheckSuite  # noqa: PLC0415

    suite = CheckSuite()
    suite.load_all_available_checkers()
    ds = suite.load_dataset(str(path))
    try:
        results, raised = suite.run_all(ds, ["cf:1.10"], skip_checks=[])["cf:1.10"]
    finally:
        ds.close()
    assert not raised, f"the checker raised on {path}: {raised}"
    errors = []

    def collect(result):
        if result.weight == 3 and result.value[1] and result.value[0] < result.value[1]:
            errors.extend(result.msgs or [result.name])
        for child in result.children:
            collect(child)

    for result in results:
        collect(result)
    return errors


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("cf")
    ring, box = base / "ring", base / "box"
    assert main(["run", "single_ring", "--set", "n_phi=6", "--set", "layers=1", "--set",
                 "tracers_per_ring=6", "--set", "plot=false", "--set", "t_end=0.2",
                 "--device", "cpu", "-q", "--out", str(ring)]) == 0
    assert main(["run", "isotropic_turbulence", "--set", "n=16", "--set", "t_end=0.1",
                 "--set", "plot=false", "--device", "cpu", "-q", "--out", str(box)]) == 0
    return ring, box


@pytest.mark.parametrize("case, name", [
    ("ring", "snapshot_00000000.nc"), ("ring", "last snapshot"), ("ring", "diagnostics.nc"),
    ("box", "last snapshot"), ("box", "diagnostics.nc"), ("box", "spectra.nc"),
    ("box", "initial_field.nc")])
def test_every_file_kind_passes_the_cf_checker(runs, case, name):
    run = runs[0] if case == "ring" else runs[1]
    path = sorted(run.glob("snapshot_*.nc"))[-1] if name == "last snapshot" else run / name
    assert path.exists()
    errors = _errors(path)
    unexpected = [e for e in errors if e not in _TIME_UNITS_ERRORS]
    assert not unexpected, f"{path.name}: {unexpected}"
    if name == "initial_field.nc":              # no time coordinate: no error at all
        assert not errors
