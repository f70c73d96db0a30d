"""The files of a run against the CF conventions they declare (issue 18): the IOOS
compliance checker, ``cf:1.10``, on every file kind of a tiny ring run and a tiny periodic
run (snapshots, diagnostics.nc, spectra.nc, initial_field.nc).

Errors are the checker's high-priority failures (its "Errors" section): none is
allowed.  Warnings (e.g. the recommended T, Z, Y, X dimension order, which particle
arrays do not have) are.  ``vortexsim.output.cf`` says how the nondimensional
quantities and time are written so that they pass.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("compliance_checker")

from vortexsim.cli import main  # noqa: E402

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
    # two rings: the checker takes a coordinate of the ring names for one to check for
    # monotonicity (and raised on the string variable ``ring`` before it became ring_name)
    assert main(["run", "leapfrog", "--set", "n_phi=6", "--set", "layers=1", "--set",
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
    assert not _errors(path), path.name


def test_quantities_are_numbers_with_their_case_units_beside(runs):
    """Every variable's units is "1"; its dimension in the case's L and T is case_units
    (absent for pure numbers); the global attributes say what L and T are for the case;
    the time coordinate is ``t``, kept as plain numbers by xarray."""
    import netCDF4
    import xarray as xr

    ring, box = runs
    expect = {"element_x": "L", "element_alpha": "L^3/T", "t": "T", "dt_next": "T",
              "energy": "L^5/T^2", "iteration": None, "energy_spectrum": "L^3/T^2",
              "wavenumber": "1/L", "ring_axis": None}
    for path, length in ((ring / "snapshot_00000000.nc", "unit of radius"),
                         (ring / "diagnostics.nc", "unit of radius"),
                         (box / "spectra.nc", "box / (2 pi)")):
        with netCDF4.Dataset(path) as nc:
            assert "time" not in nc.variables and "time" not in nc.dimensions
            assert length in nc.length_unit and nc.time_unit.startswith("T")
            for name, var in nc.variables.items():
                assert var.units == "1", (path.name, name)
                if name in expect:
                    assert getattr(var, "case_units", None) == expect[name], (path.name, name)
        with xr.open_dataset(path) as ds:
            assert ds["t"].dtype == np.float64
