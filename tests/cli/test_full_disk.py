"""A full disk: always "the disk is full" (one line, the directory and its free space),
never a message that blames permissions, and nothing more on stderr when run.log cannot
be flushed or closed.

Two kinds of test:

* REAL: a 2 MiB tmpfs mounted for the test (``mount -t tmpfs -o size=2m``, root only;
  skipped where mounting is not allowed, e.g. CI without root), filled so that the run
  runs out of space at different points (before the run directory exists, in the first
  files, in the first snapshots, later), each run a separate ``python -m vortexsim``.
* SIMULATED (everywhere): the closest stand-in, in-process: the snapshot file write
  raising ``OSError(ENOSPC)``, or the ``PermissionError`` that netCDF gives on a full
  disk while ``shutil.disk_usage`` reports no free space, and a run.log stream whose
  flush and close raise ``OSError(ENOSPC)``.
"""
from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import subprocess
import sys
from collections import namedtuple

import pytest

from vortexsim.cli import main
from vortexsim.cli import log as cli_log
from vortexsim.cli import writefail
from vortexsim.output import writers

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = ["--set", "n_phi=6", "--set", "layers=1", "--set", "tracers_per_ring=4",
        "--device", "cpu", "-qq", "--set", "plot=false"]


def _one_line(text):
    assert "Traceback" not in text and "Logging error" not in text, text
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# -- real: a small tmpfs ------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_fs(tmp_path_factory):
    """A mounted 2 MiB tmpfs (skip where the machine does not allow mounting)."""
    where = tmp_path_factory.mktemp("small_fs")
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)


def _fill(directory, leave):
    """Fill ``directory``'s file system up to ``leave`` bytes free."""
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    free = shutil.disk_usage(directory).free
    with open(os.path.join(directory, "filler"), "wb") as fh:
        with contextlib.suppress(OSError):
            fh.write(b"\0" * max(free - leave, 0))
            fh.flush()


@pytest.mark.parametrize("leave_kb", [0, 12, 24, 48, 96, 192, 400])
def test_real_full_disk_is_said_in_one_line(small_fs, leave_kb):
    """REAL full disk (tmpfs): out of space before, at the start of or during the run."""
    _fill(small_fs, leave_kb * 1024)
    out = small_fs / "run"
    done = subprocess.run(
        [sys.executable, "-m", "vortexsim", "run", "single_ring", *TINY, "--set",
         "n_phi=16", "--set", "tracers_per_ring=64", "--set", "t_end=5", "--set",
         "snapshot_interval=0.05", "--force", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")})
    line = _one_line(done.stderr)
    assert done.returncode in (1, 2), done.stderr
    assert "the disk is full" in line and str(small_fs) in line and " free" in line, line
    assert "no permission" not in line, line


# -- simulated: ENOSPC raised where the files are written ------------------------------------
def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_simulated_enospc_in_a_snapshot_write(tmp_path, capsys, monkeypatch):
    """SIMULATED: the snapshot file write raises OSError(ENOSPC)."""
    monkeypatch.setattr(writers, "write_snapshot", _enospc)
    rc = main(["run", "single_ring", *TINY, "--steps", "2", "--out", str(tmp_path / "r")])
    line = _one_line(capsys.readouterr().err)
    assert rc == 1
    assert f"the disk is full ({tmp_path / 'r'}: " in line and " free" in line, line


def test_simulated_netcdf_permission_error_on_a_full_disk(tmp_path, capsys, monkeypatch):
    """SIMULATED: the PermissionError that netCDF gives when HDF5 cannot create a file on
    a full disk, while the (writable) directory has no free space: the disk is full,
    not a permission problem."""
    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "x.nc")

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(writers, "write_snapshot", denied)
    monkeypatch.setattr(writefail.shutil, "disk_usage", lambda path: usage(10, 10, 0))
    rc = main(["run", "single_ring", *TINY, "--steps", "2", "--force", "--out",
               str(tmp_path / "r")])
    line = _one_line(capsys.readouterr().err)
    assert rc == 1 and "the disk is full" in line and "0 B free" in line, line
    assert "no permission" not in line


def test_a_permission_error_is_a_full_disk_only_where_it_is(tmp_path, monkeypatch):
    """EACCES with space left, or in a directory this process may not write: not a full
    disk; ENOSPC: always."""
    usage = namedtuple("usage", "total used free")
    exc = PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(tmp_path / "x"))
    monkeypatch.setattr(writefail.shutil, "disk_usage", lambda path: usage(1e12, 0, 1e11))
    assert writefail.disk_full_text(exc, str(tmp_path)) is None
    assert "the disk is full" in writefail.disk_full_text(
        OSError(errno.ENOSPC, "No space left on device"), str(tmp_path))
    monkeypatch.setattr(writefail.shutil, "disk_usage", lambda path: usage(10, 10, 0))
    monkeypatch.setattr(writefail.os, "access", lambda path, mode: False)
    assert writefail.disk_full_text(exc, str(tmp_path)) is None
    assert writefail.disk_full_text(OSError(errno.EROFS, "Read-only file system"),
                                    str(tmp_path)) is None


class _FullStream:
    """A run.log stream on a full disk: writes are buffered, flush and close fail."""

    def write(self, text):
        return len(text)

    def flush(self):
        _enospc()

    def close(self):
        _enospc()


def test_simulated_closing_run_log_on_a_full_disk_says_nothing(tmp_path, capsys):
    """SIMULATED: run.log's flush and close raise OSError(ENOSPC): the records are
    dropped, the handler notes it, and closing it prints nothing."""
    cli_log.add_file_log(str(tmp_path))
    handler = next(h for h in logging.getLogger("vortexsim").handlers
                   if isinstance(h, cli_log.RunLog))
    handler.stream.close()
    handler.stream = _FullStream()
    logging.getLogger("vortexsim.cli").error("a record that cannot be written")
    cli_log.remove_handlers()
    assert handler.failed
    assert capsys.readouterr().err == ""
    assert handler not in logging.getLogger("vortexsim").handlers


def test_simulated_full_disk_in_run_log_and_snapshot_is_one_line(tmp_path, capsys,
                                                                   monkeypatch):
    """SIMULATED: the snapshot write and run.log both fail with ENOSPC: one line that
    says run.log could not be written either, nothing else."""
    real_add = cli_log.add_file_log

    def add_file_log(run_dir):
        real_add(run_dir)
        for h in logging.getLogger("vortexsim").handlers:
            if isinstance(h, cli_log.RunLog):
                h.stream.close()
                h.stream = _FullStream()

    monkeypatch.setattr(cli_log, "add_file_log", add_file_log)
    import vortexsim.cli.rundir as rundir
    monkeypatch.setattr(rundir, "add_file_log", add_file_log)
    monkeypatch.setattr(writers, "write_snapshot", _enospc)
    rc = main(["run", "single_ring", *TINY, "--steps", "2", "--out", str(tmp_path / "r")])
    line = _one_line(capsys.readouterr().err)
    assert rc == 1 and "the disk is full" in line and "could not be written either" in line
