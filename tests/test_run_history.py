"""Run history that branches safely (issue 19, defect 2; vortexsim/cli/restart.py,
vortexsim/output/writers.py): a restart from a snapshot that is not the newest state of
its directory writes a branch and leaves every file of the run as it was; each branch is
bitwise the uninterrupted run from its snapshot; ``--truncate`` deletes exactly what it
says; ``info`` says what ``restart`` will do."""
from __future__ import annotations

import glob
import os
import shutil

import pytest
import xarray as xr

import vortexsim.cases
from vortexsim.cli import main
from vortexsim.output import DiagnosticsLog, read_rows

SIZE = ["--set", "n_phi=8", "--set", "tracers_per_ring=16", "--device", "cpu", "-q",
        "--set", "plot=false"]
RUN = ["run", "single_ring", *SIZE, "--set", "t_end=1", "--set", "snapshot_interval=0.25",
       "--set", "diagnostics_interval=0.05"]           # dt = 0.05: 20 steps, a row each


def _snap(k):
    return f"snapshot_{k:08d}.nc"


def _digest(run_dir):
    """{name: bytes} of the files directly in ``run_dir`` (branches are directories)."""
    return {f: open(os.path.join(run_dir, f), "rb").read() for f in sorted(os.listdir(run_dir))
            if os.path.isfile(os.path.join(run_dir, f))}


def _nc(run_dir):
    return sorted(os.path.basename(f) for f in glob.glob(os.path.join(run_dir, "*.nc")))


def _same_values(a, b, rows=None):
    """The variables of netCDF files ``a`` and ``b`` are bitwise equal (of a diagnostics
    file: its first ``rows`` rows when given)."""
    with xr.open_dataset(a) as x, xr.open_dataset(b) as y:
        if rows is not None:
            x, y = x.isel(t=slice(0, rows)), y.isel(t=slice(0, rows))
        assert sorted(x.variables) == sorted(y.variables)
        for v in x.variables:
            assert x[v].values.tobytes() == y[v].values.tobytes(), (a, b, v)


def _iterations(run_dir):
    return [r["iteration"] for r in read_rows(os.path.join(run_dir, "diagnostics.nc"))]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """The issue's run: snapshots at iterations 0, 5, 10, 15, 20 and 21 rows."""
    out = tmp_path_factory.mktemp("history") / "Z"
    assert main([*RUN, "--out", str(out)]) == 0
    assert _nc(out) == ["diagnostics.nc", *(_snap(k) for k in (0, 5, 10, 15, 20))]
    assert _iterations(out) == list(range(21))
    return out


@pytest.fixture
def run_dir(pristine, tmp_path):
    """A fresh copy of the pristine run, and the bytes of its files."""
    out = tmp_path / "Z"
    shutil.copytree(pristine, out)
    return out, _digest(out)


def _reference(tmp_path, name, *stop):
    """An uninterrupted run of the same case with another stop."""
    out = tmp_path / name
    assert main([*RUN, *stop, "--out", str(out)]) == 0
    return out


def test_the_issues_repro_loses_nothing(run_dir, capsys):
    """restart from snapshot 5 --steps 1, then from snapshot 15: the first continues in
    the branch branch_00000005, the second (heading for t_end) in branch_00000015, which
    repeats the original bitwise; the original files keep every byte and row."""
    z, before = run_dir
    assert main(["restart", str(z / _snap(5)), "--steps", "1", "-q"]) == 0
    err = capsys.readouterr().err
    assert "not the newest state" in err and "new branch" in err and "branch_00000005" in err
    assert _digest(z) == before                      # nothing deleted, nothing rewritten
    b5 = z / "branch_00000005"
    assert sorted(os.listdir(b5)) == [".vortexsim-run", "config.toml", "diagnostics.nc",
                                      "run.log", _snap(5), _snap(6)]
    assert (b5 / _snap(5)).read_bytes() == before[_snap(5)]
    assert (b5 / "config.toml").read_bytes() == before["config.toml"]
    assert _iterations(b5) == list(range(7))
    _same_values(z / "diagnostics.nc", b5 / "diagnostics.nc", rows=7)
    # the later snapshot of the original stays restartable (rows 0..15 all there)
    assert main(["restart", str(z / _snap(15)), "-q"]) == 0
    assert _digest(z) == before
    b15 = z / "branch_00000015"
    assert _nc(b15) == ["diagnostics.nc", _snap(15), _snap(20)]
    for name in _nc(b15):
        _same_values(z / name, b15 / name)           # bitwise the uninterrupted run


def test_three_branches_in_mixed_order_keep_the_run_and_are_bitwise(run_dir, tmp_path,
                                                                    capsys):
    """Branches from A = 10, B = 5 and A again, with different stops, then a restart
    inside a branch (its newest snapshot: in place) and one from the stranded
    snapshot 15: the run's files never change and each branch equals the uninterrupted
    run from its snapshot."""
    z, before = run_dir
    assert main(["restart", str(z / _snap(10)), "-q"]) == 0                    # A
    assert main(["restart", str(z / _snap(5)), "--steps", "7", "-q"]) == 0      # B
    assert main(["restart", str(z / _snap(10)), "--steps", "3", "-q"]) == 0     # A again
    assert _digest(z) == before
    assert sorted(d for d in os.listdir(z) if os.path.isdir(z / d)) == [
        "branch_00000005", "branch_00000010", "branch_00000010_2"]
    a1, b, a2 = z / "branch_00000010", z / "branch_00000005", z / "branch_00000010_2"
    # A, heading for the run's own end: the original run from snapshot 10
    assert _nc(a1) == ["diagnostics.nc", _snap(10), _snap(15), _snap(20)]
    for name in _nc(a1):
        _same_values(z / name, a1 / name)
    # B for 7 steps and A again for 3: uninterrupted runs with those ends (stops by
    # iteration: a stop time would shorten a step by a rounding error of t)
    ref_b = _reference(tmp_path, "ref_b", "--steps", "12")
    assert _nc(b) == ["diagnostics.nc", _snap(5), _snap(10), _snap(12)]
    for name in _nc(b):
        _same_values(ref_b / name, b / name)
    ref_a = _reference(tmp_path, "ref_a", "--steps", "13")
    assert _nc(a2) == ["diagnostics.nc", _snap(10), _snap(13)]
    for name in _nc(a2):
        _same_values(ref_a / name, a2 / name)
    # the newest snapshot of a branch continues in that branch
    capsys.readouterr()
    assert main(["restart", str(b / _snap(12)), "--steps", "2", "-q"]) == 0
    assert "new branch" not in capsys.readouterr().err
    assert _nc(b) == ["diagnostics.nc", _snap(5), _snap(10), _snap(12), _snap(14)]
    assert _iterations(b) == list(range(15))
    ref_c = _reference(tmp_path, "ref_c", "--steps", "14")
    _same_values(ref_c / "diagnostics.nc", b / "diagnostics.nc")
    _same_values(ref_c / _snap(14), b / _snap(14))
    # an earlier snapshot of a branch branches again, inside it
    assert main(["restart", str(b / _snap(5)), "--steps", "1", "-q"]) == 0
    assert _nc(b / "branch_00000005") == ["diagnostics.nc", _snap(5), _snap(6)]
    # and the original's later snapshot is still restartable, bitwise
    assert main(["restart", str(z / _snap(15)), "-q"]) == 0
    for name in _nc(z / "branch_00000015"):
        _same_values(z / name, z / "branch_00000015" / name)
    assert _digest(z) == before


def test_truncate_deletes_exactly_what_it_says(run_dir, capsys):
    z, before = run_dir
    assert main(["restart", str(z / _snap(10)), "--truncate", "--steps", "1", "-q"]) == 0
    err = capsys.readouterr().err
    assert "--truncate" in err and "deleting" in err
    assert "2 later snapshots (snapshot_00000015.nc, snapshot_00000020.nc)" in err
    assert "10 later diagnostics rows (t = 0.55 … 1)" in err
    assert not [d for d in os.listdir(z) if os.path.isdir(z / d)]       # no branch
    assert _nc(z) == ["diagnostics.nc", *(_snap(k) for k in (0, 5, 10, 11))]
    after = _digest(z)
    for name in ("config.toml", _snap(0), _snap(5), _snap(10)):
        assert after[name] == before[name], name
    assert _iterations(z) == list(range(12))
    with open(z / "orig.nc", "wb") as fh:
        fh.write(before["diagnostics.nc"])
    _same_values(z / "orig.nc", z / "diagnostics.nc", rows=12)  # the kept rows, and row 11


def test_rows_after_the_newest_snapshot_are_recomputed_in_place_only_when_reached(
        run_dir, pristine, capsys):
    """A run killed after snapshot 10 and the row of iteration 13: a restart heading for
    the run's end continues in place and writes those rows again (bitwise); one that
    stops before them (--steps 1) branches, keeping them."""
    z, before = run_dir
    for k in (15, 20):
        os.remove(z / _snap(k))
    rows = read_rows(z / "diagnostics.nc")[:14]
    DiagnosticsLog(z / "diagnostics.nc", {"case": "single_ring"}, rows).write()
    killed = z.parent / "killed"
    shutil.copytree(z, killed)
    assert main(["restart", str(killed / _snap(10)), "--steps", "1", "-q"]) == 0
    assert "branch_00000010" in capsys.readouterr().err
    assert _iterations(killed) == list(range(14))
    assert main(["restart", str(z / _snap(10)), "-q"]) == 0
    assert "new branch" not in capsys.readouterr().err
    assert not [d for d in os.listdir(z) if os.path.isdir(z / d)]
    assert _nc(z) == _nc(pristine)
    for name in _nc(z):
        _same_values(pristine / name, z / name)
    for k in (0, 5, 10):
        assert _digest(z)[_snap(k)] == before[_snap(k)]


def test_out_writes_the_continuation_elsewhere(run_dir, tmp_path, capsys):
    z, before = run_dir
    new = tmp_path / "new"
    assert main(["restart", str(z / _snap(20)), "--t-end", "1.1", "--out", str(new),
                 "-q"]) == 0
    assert _digest(z) == before
    assert _nc(new) == ["diagnostics.nc", _snap(20), _snap(22)]
    assert _iterations(new) == list(range(23))
    capsys.readouterr()
    assert main(["restart", str(z / _snap(5)), "--out", str(new), "-q"]) == 2   # not empty
    assert main(["restart", str(z / _snap(5)), "--out", str(tmp_path / "x"), "--truncate",
                 "-q"]) == 2
    err = capsys.readouterr().err
    assert "not an empty directory" in err and "not allowed with" in err
    assert err.count("\n") == 2 and "Traceback" not in err
    assert _digest(z) == before and not (tmp_path / "x").exists()


def test_info_says_what_restart_does(run_dir, tmp_path, capsys):
    z, _ = run_dir
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(z / _snap(10), lone)
    cases = [(z / _snap(5), "new branch " + str(z / "branch_00000005"), 0),
             (z / _snap(20), "is the end of its run", 2),
             (lone / _snap(10), "NOT restartable", 2)]
    for path, words, rc in cases:
        capsys.readouterr()
        assert main(["info", str(path)]) == 0
        out = capsys.readouterr().out
        assert "checksum ok" in out and words in out, out
        assert main(["restart", str(path), "--steps", "1", "-q"] if rc == 0 else
                    ["restart", str(path), "-q"]) == rc
    assert (z / "branch_00000005").is_dir()                    # where info said
    capsys.readouterr()
    assert main(["info", str(z / "branch_00000005" / _snap(6))]) == 0
    assert "end of its run" in capsys.readouterr().out
    assert main(["info", str(z / _snap(15))]) == 0
    out = capsys.readouterr().out
    assert "restart with: vortexsim restart" in out and "branch_00000015" in out
    assert sorted(os.listdir(lone)) == [_snap(10)]            # a refused restart left nothing


def test_a_branch_that_cannot_start_leaves_nothing(run_dir, monkeypatch, capsys):
    z, before = run_dir

    def refuse(config, **kwargs):
        raise ValueError("no such integrator")
    monkeypatch.setattr(vortexsim.cases, "from_config", refuse)
    assert main(["restart", str(z / _snap(5)), "-q"]) == 2
    assert "no such integrator" in capsys.readouterr().err
    assert _digest(z) == before and not (z / "branch_00000005").exists()


def test_adaptive_steps_branch_and_truncate_are_bitwise(tmp_path):
    """The bitwise restart of tests/test_cli.py (adaptive dt, steps shortened at output
    times) from a middle snapshot: the default branch, then --truncate in place, each
    equal to the uninterrupted run."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", "leapfrog", "--set", "plot=false", "--set", "t_end=1.2", "--set",
                 "adaptive=true", "--set", "courant=0.003", "--set", "snapshot_interval=0.4",
                 "--set", "diagnostics_interval=0.15", "--set", "n_phi=6", "--set",
                 "layers=1", "--set", "tracers_per_ring=6", "--device", "cpu", "-q",
                 "--out", str(a)]) == 0
    shutil.copytree(a, b)
    middle = _nc(b)[2]
    assert main(["restart", str(b / middle), "-q"]) == 0
    branch = b / f"branch_{middle[9:17]}"
    assert _nc(branch) == ["diagnostics.nc", *_nc(a)[2:]]
    for name in _nc(branch):
        _same_values(a / name, branch / name)
    assert main(["restart", str(b / middle), "--truncate", "-q"]) == 0
    assert _nc(b) == _nc(a)
    for name in _nc(a):
        _same_values(a / name, b / name)
