"""Commands never block on a pipe named like a snapshot: each says in one line that it is
not a regular file (exit 2).  Subprocesses with a timeout, so that a regression fails
instead of hanging the suite."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vortexsim.cli import main

TINY = ["--device", "cpu", "-q", "--set", "n_phi=6", "--set", "layers=1", "--set",
        "tracers_per_ring=4", "--set", "plot=false"]


@pytest.fixture(scope="module")
def run_with_a_fifo(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("fifo") / "r"
    assert main(["run", "single_ring", *TINY, "--steps", "1", "--out", str(run_dir)]) == 0
    os.mkfifo(run_dir / "snapshot_00000099.nc")
    return run_dir


@pytest.mark.parametrize("command", [["export", "--xdmf", "{run}"],
                                     ["info", "{fifo}"],
                                     ["restart", "{fifo}"]])
def test_a_pipe_named_like_a_snapshot_is_refused_not_read(run_with_a_fifo, command):
    fifo = run_with_a_fifo / "snapshot_00000099.nc"
    args = [a.format(run=run_with_a_fifo, fifo=fifo) for a in command]
    out = subprocess.run([sys.executable, "-m", "vortexsim", *args], capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a regular file" in lines[0]
