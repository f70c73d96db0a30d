"""A netCDF file may declare far more values than it stores: an added, never written,
chunked variable of 10⁹ float64 takes a few bytes on disk and 8 GB once read.  Every
command that opens a snapshot or a diagnostics file (info, render, export, restart,
analyze, plot) reads only the variables it needs and refuses, in one line (exit 2) and
before reading any value, a variable that declares more than the file can hold or a
snapshot dimension other than the counts the snapshot records.

Each command runs in a subprocess whose own resource usage is read with os.wait4: it
must end (a generous timeout guards against a hang, not a measure of speed) with a small
peak resident set, far below the gigabytes that reading the variable would take."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import netCDF4
import pytest

from vortexsim.cli import main

TINY = ["--device", "cpu", "-q", "--set", "n_phi=6", "--set", "layers=1", "--set",
        "tracers_per_ring=4", "--set", "plot=false"]
NEWEST = "snapshot_00000002.nc"
#: values the added variable declares (8 GB of float64)
DECLARED = 10**9
#: the most a refusing command may hold resident [kB]: the Python stack with numpy,
#: xarray and netCDF4 takes ~150 MB; reading the variable would take 8 GB
MAX_RSS_KB = 1024 * 1024
#: a generous bound on one command's run [s]: a hang guard for a loaded machine
TIMEOUT = 180


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("oversized") / "run"
    assert main(["run", "single_ring", *TINY, "--steps", "2", "--out", str(out)]) == 0
    assert (out / NEWEST).is_file() and (out / "diagnostics.nc").is_file()
    return out


def _add_huge_variable(path, unlimited=False):
    """Add to ``path`` a variable that declares :data:`DECLARED` values without storing
    them (on its own dimension, or written once at its end on an unlimited one)."""
    with netCDF4.Dataset(path, "a") as d:
        d.createDimension("junk", None if unlimited else DECLARED)
        var = d.createVariable("junk", "f8", ("junk",), chunksizes=(2**16,))
        if unlimited:
            var[DECLARED - 1] = 1.0
    assert os.path.getsize(path) < 10**6


def _measured(*args):
    """(exit code, stdout, stderr lines, peak resident set [kB]) of ``python -m
    vortexsim ARGS``, the peak that of this child alone (os.wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "vortexsim", *map(str, args)],
                                stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + TIMEOUT
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                proc.returncode = -9
                pytest.fail(f"vortexsim {' '.join(map(str, args))} ran past {TIMEOUT} s")
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode(), err.read().decode().strip().splitlines(),
                usage.ru_maxrss)


def _refused(args, *match):
    rc, out, err, rss = _measured(*args)
    assert rc == 2, (args, err)
    assert len(err) == 1 and err[0].startswith("vortexsim: error: "), (args, err)
    for m in match:
        assert m in err[0], (args, err)
    assert out == ""
    assert rss < MAX_RSS_KB, (args, rss)


@pytest.fixture(scope="module")
def huge_snapshot_run(run_dir, tmp_path_factory):
    copy = tmp_path_factory.mktemp("huge_snapshot") / "run"
    shutil.copytree(run_dir, copy)
    _add_huge_variable(copy / NEWEST)
    return copy


@pytest.mark.parametrize("command", [["info", "{snap}"],
                                     ["render", "{run}", "--out", "{run}/frame.png"],
                                     ["export", "--xdmf", "{run}"],
                                     ["restart", "{snap}", "--steps", "1"]])
def test_a_snapshot_that_declares_a_huge_variable_is_refused(huge_snapshot_run, command):
    snap = huge_snapshot_run / NEWEST
    args = [a.format(run=huge_snapshot_run, snap=snap) for a in command]
    _refused(args, str(snap), f"variable junk declares {DECLARED} values",
             "more than the file can hold")
    assert not (huge_snapshot_run / "frame.png").exists()
    assert not (huge_snapshot_run / "elements.xdmf").exists()


def test_a_huge_variable_on_an_unlimited_dimension_is_refused(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    _add_huge_variable(copy / NEWEST, unlimited=True)
    _refused(["info", copy / NEWEST], f"variable junk declares {DECLARED} values")


@pytest.fixture(scope="module")
def huge_diagnostics_run(run_dir, tmp_path_factory):
    copy = tmp_path_factory.mktemp("huge_diagnostics") / "run"
    shutil.copytree(run_dir, copy)
    _add_huge_variable(copy / "diagnostics.nc")
    return copy


@pytest.mark.parametrize("command", [["info", "{run}/diagnostics.nc"],
                                     ["analyze", "{run}"],
                                     ["plot", "{run}", "--out", "{run}/p.png"],
                                     ["restart", "{run}/" + NEWEST, "--steps", "1"]])
def test_a_diagnostics_file_that_declares_a_huge_variable_is_refused(huge_diagnostics_run,
                                                                     command):
    args = [a.format(run=huge_diagnostics_run) for a in command]
    _refused(args, "diagnostics.nc: variable junk declares", "more than the file can hold")
    assert not list(huge_diagnostics_run.glob("p*.png"))
    assert not (huge_diagnostics_run / "snapshot_00000003.nc").exists()


@pytest.mark.parametrize("command", [["info", "{snap}"],
                                     ["render", "{run}", "--out", "{run}/frame.png"],
                                     ["export", "--xdmf", "{run}"],
                                     ["restart", "{snap}", "--steps", "1"]])
def test_dimensions_other_than_the_recorded_counts_are_refused(run_dir, tmp_path, command):
    """config_json records 4 tracers; a file whose tracer dimension says 10⁶ (its
    variables' values unwritten) is refused before they are read."""
    copy = tmp_path / "run"
    copy.mkdir()
    snap = copy / NEWEST
    with netCDF4.Dataset(run_dir / NEWEST) as src, netCDF4.Dataset(snap, "w") as dst:
        dst.setncatts({a: src.getncattr(a) for a in src.ncattrs()})
        for name, dim in src.dimensions.items():
            dst.createDimension(name, 10**6 if name == "tracer" else len(dim))
        for name, var in src.variables.items():
            new = dst.createVariable(name, var.dtype, var.dimensions)
            new.setncatts({a: var.getncattr(a) for a in var.ncattrs()})
            if "tracer" not in var.dimensions:
                new[:] = var[:]
    assert json.loads(netCDF4.Dataset(snap).getncattr("config_json"))["n_tracers"] == 4
    args = [a.format(run=copy, snap=snap) for a in command]
    _refused(args, str(snap), "dimension tracer has length 1000000, but the file's "
             "n_tracers of config_json is 4")


@pytest.mark.parametrize("command, pipe", [
    (["render", "{run}", "--out", "{run}/frame.png"], NEWEST),
    (["analyze", "{run}"], "diagnostics.nc"),
    (["plot", "{run}", "--out", "{run}/p.png"], "diagnostics.nc"),
    (["info", "{run}/diagnostics.nc"], "diagnostics.nc")])
def test_a_pipe_in_place_of_a_file_is_refused_not_read(run_dir, tmp_path, command, pipe):
    """The commands of tests/cli/test_fifo_files.py, and the others: nothing would ever
    write into the pipe, so reading it would block for ever."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    os.remove(copy / pipe)
    os.mkfifo(copy / pipe)
    args = [a.format(run=copy) for a in command]
    _refused(args, str(copy / pipe), "is not a regular file")
