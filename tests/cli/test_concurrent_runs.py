"""Two vortexsim processes on one run directory: while a run is live, a second run into
its directory (with or without ``--overwrite``), a ``restart --truncate`` and an in-place
restart of its snapshot are refused in one line naming the live process, and the live
run's files end bitwise as those of the same run left alone.

The live run is held at a known point by events, not by timing: a driver patches
``VortexModel.time_step`` so that at its second step the process, holding its
directory's lock, waits for its first snapshot to be on disk (the output thread writes
it), says "holding" and waits for a line on stdin.  The other commands run while it
waits; then it is released and runs to its end.
"""
from __future__ import annotations

import os
import subprocess
import sys

import xarray as xr

from vortexsim.cli.rundir import RUN_LOCK

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
RUN = ["run", "single_ring", "--device", "cpu", "-q", "--set", "n_phi=6", "--set",
       "layers=1", "--set", "tracers_per_ring=4", "--set", "plot=false", "--steps", "4"]
#: [s] generous bound on one command's life (a hang fails the test, slowness does not)
TIMEOUT = 180

DRIVER = r'''
import os, sys, threading
from vortexsim.model import VortexModel
from vortexsim.cli import main

SNAPSHOT = os.path.join(sys.argv[sys.argv.index("--out") + 1], "snapshot_00000000.nc")
real_step = VortexModel.time_step
steps = []


def held_step(self, *args, **kwargs):
    steps.append(1)
    if len(steps) == 2:
        for _ in range(18000):              # at most 180 s: never a hang of the suite
            if os.path.exists(SNAPSHOT):
                break
            threading.Event().wait(0.01)
        print("holding" if os.path.exists(SNAPSHOT) else "no snapshot", flush=True)
        sys.stdin.readline()
    return real_step(self, *args, **kwargs)


VortexModel.time_step = held_step
sys.exit(main(sys.argv[1:]))
'''


def _vortexsim(*args):
    return subprocess.run([sys.executable, "-m", "vortexsim", *args], env=ENV,
                          capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)


def _outputs(run_dir):
    """The arrays of every snapshot and the diagnostics rows, as bytes by file name."""
    out = {}
    for name in sorted(os.listdir(run_dir)):
        if name.startswith("snapshot_") or name == "diagnostics.nc":
            with xr.open_dataset(run_dir / name) as ds:
                out[name] = {v: ds[v].values.tobytes() for v in sorted(ds.data_vars)
                             if v not in ("wall_time", "run_time")}
    return out


def test_commands_into_a_live_run_are_refused_and_the_run_ends_as_if_alone(tmp_path):
    live_dir, alone_dir = tmp_path / "live", tmp_path / "alone"
    live = subprocess.Popen([sys.executable, "-c", DRIVER, *RUN, "--out", str(live_dir)],
                            env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert live.stdout.readline().strip() == "holding", live.stderr.read()
        assert (live_dir / RUN_LOCK).exists()
        snapshot = str(live_dir / "snapshot_00000000.nc")
        for args in ([*RUN, "--out", str(live_dir)],
                     [*RUN, "--out", str(live_dir), "--overwrite"],
                     ["restart", snapshot, "-q", "--truncate"],
                     ["restart", snapshot, "-q"]):
            out = _vortexsim(*args)
            lines = out.stderr.strip().splitlines()
            assert out.returncode == 2, (args, out.stderr)
            assert len(lines) == 1, (args, out.stderr)
            if "--out" not in args or "--overwrite" in args:
                # the lock is what refuses these (a plain run is refused by the
                # existing directory first, before it asks for the lock)
                assert "in use" in lines[0] and f"process {live.pid}" in lines[0], lines
        assert _vortexsim("info", snapshot).returncode == 0   # reading needs no lock
        live.stdin.write("go\n")
        live.stdin.close()
        assert live.wait(timeout=TIMEOUT) == 0, live.stderr.read()
    finally:
        if live.poll() is None:
            live.kill()
            live.wait()
    assert _vortexsim(*RUN, "--out", str(alone_dir)).returncode == 0
    assert not (live_dir / RUN_LOCK).exists()
    live_files, alone_files = _outputs(live_dir), _outputs(alone_dir)
    assert sorted(live_files) == sorted(alone_files)
    assert len([n for n in live_files if n.startswith("snapshot_")]) >= 2
    assert live_files == alone_files
