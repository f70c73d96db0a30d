"""Restarts of runs whose remeshing changes the element count (snapshot format 3;
vortexsim/model/model.py state_dict/load_state_dict, vortexsim/output/snapshot.py): a
checkpoint after a remeshing continues bitwise in a freshly built simulation, through
the API and through ``vortexsim restart``; format 2 files still restart."""
from __future__ import annotations

import glob
import os
import shutil

import netCDF4
import numpy as np
import pytest
import xarray as xr

import vortexsim
from vortexsim.cli import main
from vortexsim.output import open_netcdf, read_snapshot
from vortexsim.output.snapshot import FORMAT_VERSION
from snapshot_tools import content_checksum

# free space, all rings remeshed on one lattice, from the start (the 32 stations have no
# volumes): N = 388, 576, 632, 680, ...
REMESH = dict(n_phi=16, layers=1, tracers_per_ring=2, remesh_every=2, remesh_spacing=0.3,
              remesh_threshold=1e-3)
CLI = ["--device", "cpu", "-q", "--set", "plot=false",
       *(a for k, v in REMESH.items() for a in ("--set", f"{k}={v}"))]


def _case():
    return vortexsim.make_case("leapfrog", device="cpu", progress=False, **REMESH)


def _same_state(a, b):
    """Bitwise equal element sets, groups, tracers and time-step state."""
    for key in ("x", "alpha", "sigma", "volume", "group"):
        x, y = np.asarray(a["elements"][key]), np.asarray(b["elements"][key])
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), key
    assert a["tracers"]["x"].tobytes() == b["tracers"]["x"].tobytes()
    assert a["groups"] == b["groups"]
    for key in ("t", "iteration", "dt", "sigma_range", "fmm_depth", "speed"):
        assert a[key] == b[key], key


def test_pickup_after_a_remeshing_continues_bitwise():
    a = _case()
    n0 = len(a.elements)
    a.run(steps=3)                              # remeshed at iteration 2
    n1 = len(a.elements)
    checkpoint = a.checkpoint_state()
    a.run(steps=3)                              # remeshed again at 4 and 6
    assert len({n0, n1, len(a.elements)}) == 3
    b = _case()
    assert len(b.elements) == n0
    b.pickup(checkpoint)
    assert len(b.elements) == n1 and b.config["n_elements"] == n1
    assert [g.as_dict() for g in b.groups] == checkpoint["state"]["groups"]
    b.run(steps=3)
    _same_state(a.state_dict(), b.state_dict())
    assert a.config == b.config


def test_an_old_state_of_another_size_is_refused_clearly():
    a = _case()
    a.run(steps=2)
    state = a.state_dict()
    del state["groups"], state["elements"]["volume"], state["elements"]["group"]
    with pytest.raises(ValueError, match="restart from a snapshot of format 3"):
        _case().load_state_dict(state)
    state = a.state_dict()                      # labels that disagree with the groups
    state["groups"][0]["stop"] -= 1
    with pytest.raises(ValueError, match="groups and group labels disagree"):
        _case().load_state_dict(state)


def _snaps(run_dir):
    return sorted(os.path.basename(f) for f in glob.glob(os.path.join(run_dir, "snapshot_*")))


def _same_values(a, b):
    with xr.open_dataset(a, decode_cf=False) as x, xr.open_dataset(b, decode_cf=False) as y:
        assert sorted(x.variables) == sorted(y.variables)
        for v in x.variables:
            assert x[v].values.tobytes() == y[v].values.tobytes(), (a, b, v)
        assert x.attrs["groups_json"] == y.attrs["groups_json"]
        assert x.attrs["config_json"] == y.attrs["config_json"]


@pytest.fixture(scope="module")
def remeshed_run(tmp_path_factory):
    """leapfrog (dt = 0.05) with remeshing to t = 0.4: snapshots at iterations 0, 3, 6, 8."""
    out = tmp_path_factory.mktemp("remesh") / "run"
    assert main(["run", "leapfrog", *CLI, "--set", "t_end=0.4",
                 "--set", "snapshot_interval=0.15", "--out", str(out)]) == 0
    return out


def test_cli_restart_after_a_remeshing_is_bitwise(remeshed_run, tmp_path):
    snaps = _snaps(remeshed_run)
    assert len(snaps) >= 3
    middle = snaps[1]
    snap = read_snapshot(remeshed_run / middle)
    assert snap.attrs["vortexsim_format_version"] == FORMAT_VERSION
    assert len(snap.state["elements"]["x"]) != 32          # remeshed: not the case's N
    run_dir = tmp_path / "run"
    shutil.copytree(remeshed_run, run_dir)
    assert main(["restart", str(run_dir / middle), "-q"]) == 0
    branch = run_dir / f"branch_{snap.iteration:08d}"
    assert _snaps(branch)[-1] == snaps[-1]
    for name in _snaps(branch):
        _same_values(remeshed_run / name, branch / name)


def _as_format_2(path):
    """Rewrite ``path`` as the format 2 code wrote it: no element volumes, labels,
    groups and last step strain; the checksum of format 2."""
    ds = open_netcdf(path).drop_vars(["element_volume", "element_group", "step_strain_last"])
    attrs = dict(ds.attrs)
    del attrs["groups_json"]
    attrs["vortexsim_format_version"] = np.int64(2)
    attrs["checksum_sha256"] = content_checksum(ds, attrs)
    ds.attrs = attrs
    os.remove(path)
    ds.to_netcdf(path, engine="netcdf4")


def test_format_2_files_still_restart(tmp_path, capsys):
    """A format 2 snapshot of a run without remeshing restarts bitwise (the volumes and
    groups are the case's); one of a remeshed run is refused in one line."""
    ref, run_dir = tmp_path / "ref", tmp_path / "run"
    size = ["--device", "cpu", "-q", "--set", "plot=false", "--set", "n_phi=8",
            "--set", "tracers_per_ring=4"]
    assert main(["run", "single_ring", *size, "--set", "t_end=0.2",
                 "--set", "snapshot_interval=0.1", "--out", str(ref)]) == 0
    shutil.copytree(ref, run_dir)
    middle = _snaps(ref)[1]
    _as_format_2(run_dir / middle)
    snap = read_snapshot(run_dir / middle)
    assert "groups" not in snap.state and "volume" not in snap.state["elements"]
    assert main(["restart", str(run_dir / middle), "--out", str(tmp_path / "cont"),
                 "-q"]) == 0
    last = _snaps(ref)[-1]
    with xr.open_dataset(ref / last) as x, xr.open_dataset(tmp_path / "cont" / last) as y:
        for v in ("element_x", "element_alpha", "element_sigma", "tracer_x"):
            assert x[v].values.tobytes() == y[v].values.tobytes(), v
    with netCDF4.Dataset(tmp_path / "cont" / last) as d:      # the restart writes the newest
        assert d.getncattr("vortexsim_format_version") == FORMAT_VERSION


def test_format_2_snapshot_of_a_remeshed_run_is_refused(remeshed_run, tmp_path, capsys):
    """Its N is not the case's, and it lacks what a rebuild of the remeshed set needs."""
    run_dir = tmp_path / "run"
    shutil.copytree(remeshed_run, run_dir)
    path = run_dir / _snaps(remeshed_run)[1]
    _as_format_2(path)
    capsys.readouterr()
    assert main(["restart", str(path), "--out", str(tmp_path / "cont"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "restart from a snapshot of format 3" in err, err
