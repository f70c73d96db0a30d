"""One writer per run directory (vortexsim/cli/rundir.py, RunDirLock): a run or restart
holds an OS lock on its directory for its whole life; another run, ``--overwrite`` or
restart into it is refused in one line naming the holder; reading commands never wait for
it; a killed holder leaves no stale lock."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vortexsim.cli import main
from vortexsim.cli.common import UsageError
from vortexsim.cli.rundir import RUN_LOCK, RunDirLock

TINY = ["--device", "cpu", "-q", "--set", "n_phi=6", "--set", "layers=1", "--set",
        "tracers_per_ring=4", "--set", "plot=false"]


def _run(run_dir, *extra):
    return main(["run", "single_ring", *TINY, "--steps", "2", "--out", str(run_dir), *extra])


def _files(run_dir):
    """Every file of ``run_dir`` (not its subdirectories, not its lock) and its bytes."""
    return {name: (run_dir / name).read_bytes() for name in sorted(os.listdir(run_dir))
            if name != RUN_LOCK and (run_dir / name).is_file()}


def test_a_run_or_restart_into_a_directory_in_use_is_refused_and_touches_nothing(
        tmp_path, capsys):
    run_dir = tmp_path / "r"
    assert _run(run_dir) == 0
    before = _files(run_dir)
    snapshot = str(run_dir / "snapshot_00000000.nc")
    capsys.readouterr()
    with RunDirLock(str(run_dir), "the test"):
        assert _run(run_dir, "--overwrite") == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"process {os.getpid()} (the test)" in err
        assert "in use" in err and "--out DIR" in err
        assert main(["restart", snapshot, "-q", "--truncate"]) == 2
        assert "in use" in capsys.readouterr().err
        assert main(["info", snapshot]) == 0           # reading needs no lock
        capsys.readouterr()
    assert _files(run_dir) == before                  # the refused commands touched nothing
    assert RUN_LOCK not in os.listdir(run_dir)        # and the ended run left no lock file
    assert _run(run_dir, "--overwrite") == 0          # the lock is free again


def test_the_lock_holds_inside_one_process_too(tmp_path):
    """flock locks belong to open files: a second lock in the same process is refused as
    one from another process would be."""
    with RunDirLock(str(tmp_path)) as lock:
        assert lock.held
        with pytest.raises(UsageError, match="in use by process"):
            RunDirLock(str(tmp_path))
    RunDirLock(str(tmp_path)).release()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from vortexsim.cli.rundir import RunDirLock; "
         f"lock = RunDirLock({str(tmp_path)!r}, 'holder'); print('locked', flush=True); "
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(UsageError, match=rf"process {holder.pid} \(holder\)"):
            RunDirLock(str(tmp_path))
    finally:
        holder.kill()                                  # SIGKILL: no clean-up of its own
        holder.wait()
    assert (tmp_path / RUN_LOCK).exists()              # left by the killed holder
    with RunDirLock(str(tmp_path), "after"):           # the kernel released its lock
        assert (tmp_path / RUN_LOCK).read_text() == f"process {os.getpid()} (after)\n"
    assert not (tmp_path / RUN_LOCK).exists()          # a released lock leaves no file


def test_a_snapshot_copied_among_user_files_restarts_into_a_new_directory(tmp_path, capsys):
    """A directory without the run marker is never written: the restart of a snapshot
    copied there continues in a new directory inside it, and --truncate is refused."""
    import shutil
    run_dir, user = tmp_path / "r", tmp_path / "mine"
    assert _run(run_dir) == 0
    user.mkdir()
    (user / "plot.png").write_bytes(b"the user's own picture")
    shutil.copy(run_dir / "snapshot_00000000.nc", user)
    shutil.copy(run_dir / "diagnostics.nc", user)
    before = _files(user)
    capsys.readouterr()
    assert main(["restart", str(user / "snapshot_00000000.nc"), "-q", "--truncate"]) == 2
    assert "not a run directory of vortexsim" in capsys.readouterr().err
    assert main(["restart", str(user / "snapshot_00000000.nc"), "-q", "--steps", "1"]) == 0
    err = capsys.readouterr().err
    assert "none of its files are written" in err and "branch_00000000" in err
    assert _files(user) == before                      # the user's files, every byte
    assert (user / "branch_00000000" / "snapshot_00000001.nc").exists()


def test_a_file_system_without_locks_is_written_unguarded_with_a_warning(
        tmp_path, monkeypatch, caplog):
    import errno
    from vortexsim.cli import rundir

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(rundir.fcntl, "flock", no_locks)
    with caplog.at_level("WARNING", logger="vortexsim.cli"):
        with RunDirLock(str(tmp_path)) as lock:
            assert not lock.held
    assert "takes no lock" in caplog.text and not (tmp_path / RUN_LOCK).exists()
