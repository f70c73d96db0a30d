"""Snapshots, the diagnostics file and atomic writes (vortexsim/output)."""
from __future__ import annotations

import os
import shutil

import netCDF4
import numpy as np
import pytest
import xarray as xr

import vortexsim
from vortexsim.output import (DiagnosticsLog, SnapshotError, atomic_path, read_rows,
                              read_snapshot, write_snapshot)

META = {"case": "single_ring", "config": 'case = "single_ring"\n', "vortexsim_version": "0",
        "device": "cpu", "precision": "float64", "kernel": "gaussian", "method": "direct",
        "tolerance": 1e-6, "integrator": "rk4"}
SCHEDULE = {"t0": 0.0, "snapshot_interval": 0.5, "diagnostics_interval": 0.1,
            "next_snapshot": 3, "next_diagnostics": 11, "diagnostics_rows": 11,
            "stop_time": 2.0, "stop_iteration": None, "plot": 1}


@pytest.fixture(scope="module")
def sim():
    s = vortexsim.make_case("single_ring", n_phi=8, tracers_per_ring=8, device="cpu",
                            progress=False, adaptive=True, nu=1e-3)
    s.run(steps=3)
    return s


def _all_have_units(ds):
    return {name: "units" in var.attrs for name, var in ds.variables.items()}


def test_snapshot_round_trip_is_exact(sim, tmp_path):
    path = tmp_path / "snap.nc"
    state = sim.state_dict()
    write_snapshot(path, state, sim.config, META, SCHEDULE, "scheduled", "h")
    snap = read_snapshot(path)
    assert snap.config == sim.config
    assert snap.schedule == SCHEDULE
    assert snap.state["t"] == state["t"] and snap.state["iteration"] == state["iteration"]
    assert snap.state["dt"] == state["dt"] and snap.state["sigma_range"] == state["sigma_range"]
    for group in ("elements", "tracers"):
        for k, v in state[group].items():
            got = snap.state[group][k]
            assert got.dtype == v.dtype and np.array_equal(got, v, equal_nan=v.dtype.kind == "f")
            assert got.tobytes() == v.tobytes()
    with xr.open_dataset(path, engine="netcdf4") as ds:
        assert all(_all_have_units(ds).values()), _all_have_units(ds)
        assert all("long_name" in v.attrs for v in ds.variables.values())
        for attr in ("Conventions", "history", "case", "config", "vortexsim_version", "device",
                     "precision", "kernel", "tolerance"):
            assert attr in ds.attrs
        assert ds.sizes["element"] == len(sim.elements) and ds.sizes["component"] == 3
        assert ds.sizes["tracer"] == len(sim.tracers)


def test_restart_refuses_bad_files(sim, tmp_path):
    path = tmp_path / "snap.nc"
    write_snapshot(path, sim.state_dict(), sim.config, META, SCHEDULE)
    data = path.read_bytes()
    # truncated
    (tmp_path / "trunc.nc").write_bytes(data[: len(data) // 2])
    with pytest.raises(SnapshotError, match="truncated"):
        read_snapshot(tmp_path / "trunc.nc")
    # foreign netCDF
    xr.Dataset({"a": ("x", np.arange(3.0))}).to_netcdf(tmp_path / "foreign.nc")
    with pytest.raises(SnapshotError, match="foreign"):
        read_snapshot(tmp_path / "foreign.nc")
    # not netCDF at all
    (tmp_path / "text.nc").write_text("hello")
    with pytest.raises(SnapshotError, match="not netCDF"):
        read_snapshot(tmp_path / "text.nc")
    # a valid netCDF file whose numbers were changed
    shutil.copy(path, tmp_path / "changed.nc")
    with netCDF4.Dataset(tmp_path / "changed.nc", "a") as d:
        d["element_alpha"][0, 1, 2] = d["element_alpha"][0, 1, 2] * (1 + 1e-15) + 1e-300
    with pytest.raises(SnapshotError, match="checksum"):
        read_snapshot(tmp_path / "changed.nc")
    # a variable removed
    with xr.open_dataset(path, engine="netcdf4") as ds:
        ds.load().drop_vars("dt_next").to_netcdf(tmp_path / "partial.nc")
    with pytest.raises(SnapshotError, match="incomplete"):
        read_snapshot(tmp_path / "partial.nc")
    with pytest.raises(SnapshotError, match="does not exist"):
        read_snapshot(tmp_path / "missing.nc")


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            with open(tmp, "w") as fh:
                fh.write("new, half written")
            raise RuntimeError("crash while writing")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.txt"]  # no temporary file left
    with atomic_path(path) as tmp:
        with open(tmp, "w") as fh:
            fh.write("new")
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["f.txt"]


def test_diagnostics_file_and_resume(sim, tmp_path):
    path = tmp_path / "diagnostics.nc"
    log = DiagnosticsLog(path, META)
    rows = []
    for it in range(4):
        row = sim.diagnostics()
        row.update(iteration=it, t=0.1 * it, dt_next=sim.dt)
        rows.append(row)
        log.append(row)
    with xr.open_dataset(path, engine="netcdf4") as ds:
        assert ds.sizes["t"] == 4 and ds.sizes["component"] == 3
        assert all(_all_have_units(ds).values()), _all_have_units(ds)
        assert list(ds["iteration"].values) == [0, 1, 2, 3]
        assert list(ds["ring_name"].values) == ["ring"]         # CF: an auxiliary coordinate
        assert ds["ring_centre"].attrs.get("coordinates") is None   # decoded by xarray
        assert "ring_name" in ds["ring_centre"].coords
        for k in ("energy", "helicity", "enstrophy", "linear_impulse", "ring_centre"):
            assert k in ds
    back = read_rows(path)
    assert back[2]["energy"] == rows[2]["energy"]
    assert np.array_equal(back[3]["ring_centre"], rows[3]["ring_centre"])
    resumed = DiagnosticsLog.resume(path, META, iteration=1, expected_rows=2)
    assert [r["iteration"] for r in resumed.rows] == [0, 1]
    with pytest.raises(SnapshotError, match="expects 3"):
        DiagnosticsLog.resume(path, META, iteration=1, expected_rows=3)
    with pytest.raises(SnapshotError, match="missing"):
        DiagnosticsLog.resume(tmp_path / "none.nc", META, iteration=1, expected_rows=2)
