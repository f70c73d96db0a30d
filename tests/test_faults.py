"""Fault injection: `vortexsim run`, `vortexsim restart` and the viewing commands
(`info`, `render`, `export`, `analyze`) killed at random times; runs and restarts then
restarted bitwise.

One uninterrupted reference run; then commands killed at seeded random times by
SIGINT, SIGTERM, SIGKILL, two or three SIGINTs in a row, SIGINT then SIGTERM: runs of the
same command, restarts of a run stopped at t = 0.5 (continuing to the reference's end),
and the viewing commands on a finished run.  For each kill it asserts that the process
ends within seconds (no hang), that it is not ended by the signal (exit 130/143 for
SIGINT/SIGTERM, the first signal deciding; 0 where it finished before the kill; only
SIGKILL ends a process by its signal), one line on stderr and no traceback; for runs and
restarts that every netCDF file left in the run directory is whole (a snapshot passes
its checksum, the diagnostics file opens), and that restarting from the newest snapshot
to the end gives bitwise the reference's final snapshot and diagnostics rows.  A
truncated latest snapshot is refused and the one before restarts bitwise.

``VORTEXSIM_FAULTS=N`` sets the total number of kills (default 10, a couple of minutes
on 2 cores): four in ten kill runs, two in ten restarts and four in ten the viewing
commands (in turn).
The summary line printed at the end (``-s``) counts kills by target and kind, hangs,
deaths by signal and restarts compared bitwise.
"""
from __future__ import annotations

import glob
import os
import random
import shutil
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
       "--device", "cpu", "-qq", "--set", "t_end=2", "--set", "snapshot_interval=0.1",
       "--set", "diagnostics_interval=0.05", "--set", "plot=false"]
T_END = 2.0
KINDS = ("SIGINT", "SIGTERM", "SIGKILL", "SIGINT x2", "SIGINT x3", "SIGINT+SIGTERM")
#: what each kill stops, in turn (``view``: the viewing commands, in turn)
TARGETS = ("run", "view", "run", "restart", "view", "run", "view", "restart", "run", "view")
VIEWS = ("info", "render", "export", "analyze")
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
    sequence = {"SIGTERM": [signal.SIGTERM], "SIGINT x2": [signal.SIGINT] * 2,
                "SIGINT x3": [signal.SIGINT] * 3,
                "SIGINT+SIGTERM": [signal.SIGINT, signal.SIGTERM]}.get(kind, [signal.SIGINT])
    for i, sig in enumerate(sequence):
        if i:
            time.sleep(rng.uniform(0.0, 0.15))
        if proc.poll() is None:
            proc.send_signal(sig)


@pytest.fixture(scope="module")
def reference_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("faults") / "reference"
    proc = _vortexsim([*RUN, "--out", str(out)])
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return out


@pytest.fixture(scope="module")
def reference(reference_dir):
    return _final(str(reference_dir))


@pytest.fixture(scope="module")
def partial_dir(tmp_path_factory):
    """The reference's run stopped at t = 0.5: what a killed restart continues."""
    out = tmp_path_factory.mktemp("faults") / "partial"
    proc = _vortexsim([*RUN, "--set", "t_end=0.5", "--out", str(out)])
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return out


def _ended(proc, kind, err):
    """Not ended by a signal (but SIGKILL), exit 128 + the first signal or 0 (done before
    the kill), one line and no traceback: the number of deaths by signal (0 or 1)."""
    rc = proc.returncode
    if kind == "SIGKILL":
        return 0
    first = signal.SIGTERM if kind == "SIGTERM" else signal.SIGINT
    assert "Traceback" not in err, (kind, err)
    if rc < 0:
        return 1
    assert rc in (0, 128 + first), (kind, rc, err)
    if rc:
        assert len(err.strip().splitlines()) == 1, (kind, err)
    return 0


def _view_args(command, run_dir, tmp):
    return {"info": ["info", _snapshots(run_dir)[-1]],
            "render": ["render", str(run_dir), "--out", str(tmp / "frames"), "-qq"],
            "export": ["export", "--xdmf", str(run_dir), "-qq"],
            "analyze": ["analyze", str(run_dir), "-qq"]}[command]


def test_random_kills_lose_nothing_and_restart_bitwise(reference, reference_dir, partial_dir,
                                                       tmp_path):
    rng = random.Random(19)
    counts = {}
    compared = hung = by_signal = 0
    views, deaths = 0, []
    for i in range(N_KILLS):
        kind = KINDS[i % len(KINDS)]
        target = TARGETS[i % len(TARGETS)]
        out = tmp_path / f"kill{i}"
        if target == "view":
            target = VIEWS[views % len(VIEWS)]
            views += 1
            shutil.copytree(reference_dir, out)
            proc = _vortexsim(_view_args(target, str(out), tmp_path / f"view{i}"))
        elif target == "restart":
            shutil.copytree(partial_dir, out)
            proc = _vortexsim(["restart", _snapshots(out)[-1], "--t-end", str(T_END), "-qq"])
        else:
            proc = _vortexsim([*RUN, "--out", str(out)])
        # a random moment: start-up (imports, the t = 0 evaluation), steps, writes, reads
        time.sleep(rng.uniform(0.2, 3.0))
        _kill(proc, kind, rng)
        try:
            _, err = proc.communicate(timeout=EXIT_WITHIN)
        except subprocess.TimeoutExpired:
            hung += 1
            proc.kill()
            proc.communicate()
            continue
        counts[f"{target} {kind}"] = counts.get(f"{target} {kind}", 0) + 1
        if _ended(proc, kind, err):
            by_signal += 1
            deaths.append((i, target, kind, proc.returncode, err))
        if target not in ("run", "restart"):
            continue
        if proc.returncode == 0:                       # the run ended before the kill
            assert _final(str(out)) == reference
            compared += 1
            continue
        if not _snapshots(out):                        # killed before the first snapshot
            continue
        newest = _whole(str(out))
        if read_snapshot(newest).t < T_END - 1e-12:   # else killed after its last step
            restart = _vortexsim(["restart", newest, "--t-end", str(T_END), "-q"])
            _, err = restart.communicate(timeout=300)
            assert restart.returncode == 0, (kind, err)
        assert _final(str(out)) == reference, (i, target, kind)
        compared += 1
    by_target = {}
    for key, n in counts.items():
        by_target[key.split()[0]] = by_target.get(key.split()[0], 0) + n
    by_kind = {k: sum(n for key, n in counts.items() if key.split(" ", 1)[1] == k)
               for k in KINDS}
    print(f"\nfault injection: {N_KILLS} kills (by target: "
          f"{', '.join(f'{k} {n}' for k, n in by_target.items())}; by kind: "
          f"{', '.join(f'{k} {n}' for k, n in by_kind.items())}), {hung} hung, "
          f"{by_signal} died by a signal other than SIGKILL, {compared} runs and restarts "
          "compared bitwise, all equal")
    assert hung == 0 and by_signal == 0, deaths


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
