"""Fault injection: `vortexsim run` killed at random times, then restarted (issue 19).

One uninterrupted reference run; then runs of the same command killed at seeded random
times by SIGINT, SIGTERM, SIGKILL, two or three SIGINTs in a row; a truncated latest
snapshot.  For each it asserts that the process ends within seconds (no hang), that
every netCDF file left in the run directory is whole (a snapshot passes its checksum,
the diagnostics file opens), and that restarting from the newest snapshot to the end
gives bitwise the reference's final snapshot and diagnostics rows.

``VORTEXSIM_FAULTS=N`` sets the number of kills (default 10, about a minute on 2 cores);
the summary line printed at the end (``-s``) counts kills by kind, restarts compared
and hangs.
"""
from __future__ import annotations

import glob
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import xarray as xr

from vortexsim.output.snapshot import SnapshotError, read_snapshot

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
#: the run: single_ring at a tiny size, a snapshot every 0.1 (2 steps), a row every step
RUN = ["run", "single_ring", "--set", "n_phi=8", "--set", "tracers_per_ring=16",
       "--device", "cpu", "-q", "--set", "t_end=2", "--set", "snapshot_interval=0.1",
       "--set", "diagnostics_interval=0.05", "--set", "plot=false"]
T_END = 2.0
KINDS = ("SIGINT", "SIGTERM", "SIGKILL", "SIGINT x2", "SIGINT x3")
N_KILLS = int(os.environ.get("VORTEXSIM_FAULTS", "10"))
#: [s] the longest a killed process may take to exit (the checkpoint included)
EXIT_WITHIN = 20.0


def _vortexsim(args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "vortexsim", *args], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)


def _snapshots(run_dir):
    return sorted(glob.glob(os.path.join(run_dir, "snapshot_*.nc")))


def _final(run_dir):
    """(the last snapshot's arrays, the diagnostics rows' iteration and energy) as bytes."""
    with xr.open_dataset(_snapshots(run_dir)[-1]) as s:
        snap = {v: s[v].values.tobytes() for v in ("element_x", "element_alpha",
                                                    "element_sigma", "tracer_x", "t")}
    with xr.open_dataset(os.path.join(run_dir, "diagnostics.nc")) as d:
        rows = (d["iteration"].values.tolist(), d["energy"].values.tobytes())
    return snap, rows


def _whole(run_dir):
    """Every snapshot passes its checksum and the diagnostics file opens; the newest
    readable snapshot (None when the kill came before the first)."""
    newest = None
    for path in _snapshots(run_dir):
        read_snapshot(path)                            # raises unless whole and verified
        newest = path
    diag = os.path.join(run_dir, "diagnostics.nc")
    if os.path.exists(diag):
        with xr.open_dataset(diag) as d:
            assert d.sizes["t"] >= 1
    assert not glob.glob(os.path.join(run_dir, "*.nc.tmp")), os.listdir(run_dir)
    return newest


def _kill(proc, kind, rng):
    if kind == "SIGKILL":
        proc.send_signal(signal.SIGKILL)
        return
    sig = signal.SIGTERM if kind == "SIGTERM" else signal.SIGINT
    repeats = {"SIGINT x2": 2, "SIGINT x3": 3}.get(kind, 1)
    for i in range(repeats):
        if i:
            time.sleep(rng.uniform(0.0, 0.15))
        if proc.poll() is None:
            proc.send_signal(sig)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("faults") / "reference"
    proc = _vortexsim([*RUN, "--out", str(out)])
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return _final(str(out))


def test_random_kills_lose_nothing_and_restart_bitwise(reference, tmp_path):
    rng = random.Random(19)
    counts = {k: 0 for k in KINDS}
    compared = hung = 0
    for i in range(N_KILLS):
        kind = KINDS[i % len(KINDS)]
        out = tmp_path / f"kill{i}"
        proc = _vortexsim([*RUN, "--out", str(out)])
        # a random moment: start-up (imports, the t = 0 evaluation), steps or writes
        time.sleep(rng.uniform(0.2, 3.0))
        _kill(proc, kind, rng)
        t0 = time.time()
        try:
            _, err = proc.communicate(timeout=EXIT_WITHIN)
        except subprocess.TimeoutExpired:
            hung += 1
            proc.kill()
            proc.communicate()
            pytest.fail(f"kill {i} ({kind}): no exit within {EXIT_WITHIN} s")
        counts[kind] += 1
        assert time.time() - t0 < EXIT_WITHIN
        if proc.returncode == 0:                       # the run ended before the kill
            assert _final(str(out)) == reference
            compared += 1
            continue
        assert "Traceback" not in err, (kind, err)
        if not _snapshots(out):                        # killed before the first snapshot
            continue
        newest = _whole(str(out))
        if read_snapshot(newest).t < T_END - 1e-12:   # else killed after its last step
            restart = _vortexsim(["restart", newest, "-q"])
            _, err = restart.communicate(timeout=300)
            assert restart.returncode == 0, (kind, err)
        assert _final(str(out)) == reference, (i, kind)
        compared += 1
    print(f"\nfault injection: {N_KILLS} kills ({', '.join(f'{k}: {n}' for k, n in counts.items())}), "
          f"{compared} restarts compared bitwise, {hung} hung")
    assert hung == 0


def test_a_truncated_newest_snapshot_is_refused_and_the_one_before_restarts(reference,
                                                                            tmp_path):
    out = tmp_path / "truncated"
    proc = _vortexsim([*RUN, "--set", "t_end=0.5", "--out", str(out)])
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    snaps = _snapshots(out)
    with open(snaps[-1], "r+b") as fh:                 # a write cut short by a crash
        fh.truncate(os.path.getsize(snaps[-1]) // 2)
    with pytest.raises(SnapshotError):
        read_snapshot(snaps[-1])
    bad = _vortexsim(["restart", snaps[-1], "-q"])
    _, err = bad.communicate(timeout=120)
    assert bad.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    os.remove(snaps[-1])
    ok = _vortexsim(["restart", snaps[-2], "--t-end", "2", "-q"])
    _, err = ok.communicate(timeout=300)
    assert ok.returncode == 0, err
    assert _final(str(out)) == reference
