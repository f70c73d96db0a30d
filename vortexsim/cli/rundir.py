"""Run directories: the marker that makes a directory one, the lock that lets one process
write there at a time, the files vortexsim writes there (and only those are ever replaced
or removed), preparing a fresh one, the metadata and history of its files, the resolved
``config.toml`` and the case's own files."""
from __future__ import annotations

import contextlib
import datetime
import glob
import json
import logging
import os
import shlex
import stat

try:
    import fcntl
except ImportError:                       # not a POSIX system: no run-directory lock
    fcntl = None

from ..config import CLI_ONLY, to_toml
from .common import UsageError
from .log import add_file_log, remove_handlers
from .writefail import os_error_text

__all__ = ["RUN_MARKER", "RUN_LOCK", "RunDirLock", "directory_entries", "check_output_dir",
           "OUR_FILES", "DERIVED_KEYS", "is_run_dir", "our_files_size",
           "mark_run_dir", "prepare_run_dir", "remove_branch", "write_case_files",
           "run_metadata", "history_line", "resolved_toml"]

logger = logging.getLogger("vortexsim.cli")


#: the file that marks a directory as a run directory of vortexsim (written by every
#: ``vortexsim run``); ``--overwrite`` replaces only a directory that has it
RUN_MARKER = ".vortexsim-run"


#: the lock file of a run directory: the one process writing there (a run or a restart)
#: holds an exclusive OS lock on it for its whole life (:class:`RunDirLock`)
RUN_LOCK = ".vortexsim-lock"


class RunDirLock:
    """One writer per run directory: an exclusive, non-blocking ``flock`` on
    :data:`RUN_LOCK` in ``run_dir`` (created if missing), held until :meth:`release` or
    the end of the process.  The kernel releases it whenever the process ends, also by
    SIGKILL, so a lock is never left stale; the file says which process holds it, and
    :meth:`release` removes it (a file left by a killed process is taken over).  Only
    processes that write take it: reading commands never wait for it.

    Raises :class:`UsageError` (one line, exit 2) when another process holds it, naming
    that process.  A context manager: ``with RunDirLock(run_dir): ...``.
    """

    def __init__(self, run_dir, command="vortexsim"):
        self.run_dir, self._file = run_dir, None
        self.path = os.path.join(run_dir, RUN_LOCK)
        if fcntl is None:
            return
        for _ in range(3):        # the holder before may remove the file as we open it
            fh = self._locked_file()
            if fh is not None:
                break
        else:
            raise UsageError(f"run directory {run_dir}: could not take its lock "
                             f"{self.path}; try again.")
        if fh is False:           # a file system without locks: written unguarded
            return
        fh.seek(0)
        fh.truncate()
        fh.write(f"process {os.getpid()} ({command})\n")
        fh.flush()
        self._file = fh

    def _locked_file(self):
        """The lock file, open and locked by this process; None when the file was removed
        (by the holder that just ended) between its opening and its locking; False where
        the file system takes no lock (a warning says so)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        fh = os.fdopen(fd, "r+", encoding="utf-8", errors="replace")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:           # EWOULDBLOCK: another open file holds it
            holder = " ".join(fh.read(300).split()) or "another process"
            fh.close()
            raise UsageError(f"run directory {self.run_dir} is in use by {holder}; only one "
                             "run or restart writes into a run directory at a time: wait for "
                             "it to end, or write elsewhere with --out DIR.") from None
        except OSError as exc:            # ENOLCK, EINVAL: the file system has no locks
            fh.close()
            with contextlib.suppress(OSError):
                os.remove(self.path)
            logger.warning("run directory %s: its file system takes no lock (%s); nothing "
                           "keeps a second run from writing there at the same time",
                           self.run_dir, exc.strerror or exc)
            return False
        try:
            current = os.stat(self.path, follow_symlinks=False).st_ino
        except OSError:
            current = None
        if current != os.fstat(fh.fileno()).st_ino:
            fh.close()
            return None
        return fh

    @property
    def held(self):
        """Whether this process holds the lock (False where the file system has none)."""
        return self._file is not None

    def release(self):
        """Let the next process write here: the lock file is removed, then unlocked."""
        fh, self._file = self._file, None
        if fh is None:
            return
        with contextlib.suppress(OSError):
            if os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fh.fileno()).st_ino:
                os.remove(self.path)
        with contextlib.suppress(OSError):
            fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def directory_entries(run_dir):
    """The names in ``run_dir`` other than its lock file (:data:`RUN_LOCK`)."""
    return [name for name in os.listdir(run_dir) if name != RUN_LOCK]


def check_output_dir(run_dir, overwrite):
    """Whether ``run_dir`` holds anything (True) after refusing (UsageError) an output
    directory that a run may not write into: a file, a non-empty directory without
    ``overwrite``, or with it one that is not a run directory of vortexsim (none of its
    files are touched).  ``vortexsim run`` asks before it builds the case, and again under
    the directory's lock (another run may have come first)."""
    if not os.path.exists(run_dir):
        return False
    existing = not os.path.isdir(run_dir) or bool(directory_entries(run_dir))
    if existing and not overwrite:
        raise UsageError(f"output directory {run_dir} exists and is not empty; pass "
                         "--overwrite to replace its vortexsim files, or choose another "
                         "with --out DIR.")
    if not os.path.isdir(run_dir):
        raise UsageError(f"--out {run_dir} is a file, not a directory.")
    if existing and not is_run_dir(run_dir):
        raise UsageError(f"--overwrite: {run_dir} is not a run directory of vortexsim (it "
                         f"has no {RUN_MARKER} file; runs of vortexsim from before the marker "
                         "have none either), so none of its files are touched; delete or "
                         "empty it yourself, or choose another with --out DIR.")
    return existing


DERIVED_KEYS = ("case", "t0", "groups", "n_elements", "n_tracers")


OUR_FILES = ("snapshot_*.nc", "diagnostics.nc", "spectra.nc", "plot.png", "config.toml",
              "run.log", ".snapshot_*.tmp", ".diagnostics.nc.*.tmp", ".spectra.nc.*.tmp",
              ".plot.png.*.tmp", ".config.toml.*.tmp", "initial_field.nc",
              ".initial_field.nc.*.tmp", "elements.xdmf", "tracers.xdmf", "xdmf_index.bin",
              ".elements.xdmf.*.tmp", ".tracers.xdmf.*.tmp", ".xdmf_index.bin.*.tmp",
              # vortexsim render's default folder: frames of the run being replaced
              "frames/render_*.png", "frames/.render_*.png.*.tmp")


def is_run_dir(run_dir):
    """True when ``run_dir`` holds the marker of a run directory (:data:`RUN_MARKER`): a
    regular file (not a link) of at most 4 kB holding a JSON object with
    ``"vortexsim_run"``."""
    path = os.path.join(run_dir, RUN_MARKER)
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 4096:
            return False
        with open(path, encoding="utf-8") as fh:
            marker = json.loads(fh.read(4097))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and "vortexsim_run" in marker


def our_files_size(run_dir):
    """Bytes of vortexsim's files in ``run_dir`` (what ``--overwrite`` removes)."""
    total = 0
    for pattern in OUR_FILES:
        for f in glob.glob(os.path.join(glob.escape(run_dir), pattern)):
            try:
                total += os.lstat(f).st_size
            except OSError:
                pass
    return total


def mark_run_dir(run_dir):
    """Write the marker :data:`RUN_MARKER` into ``run_dir`` unless it holds one."""
    from .. import __version__  # noqa: PLC0415
    if not is_run_dir(run_dir):
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        with open(os.path.join(run_dir, RUN_MARKER), "w", encoding="utf-8") as fh:
            json.dump({"vortexsim_run": 1, "vortexsim_version": __version__,
                       "created": now}, fh)
            fh.write("\n")


def prepare_run_dir(run_dir, overwrite, config_toml, command="vortexsim run"):
    """Create ``run_dir`` and take its lock (:class:`RunDirLock`, returned: the caller
    holds it while the run writes), check again under the lock that the directory is
    empty (or, with ``overwrite``, a run directory of vortexsim, whose vortexsim files are
    then removed), write the marker, start run.log and write config.toml."""
    from ..output import write_text  # noqa: PLC0415
    os.makedirs(run_dir, exist_ok=True)
    lock = RunDirLock(run_dir, command)
    try:
        check_output_dir(run_dir, overwrite)      # again: another run may have come first
        if overwrite:
            for pattern in OUR_FILES:
                for f in glob.glob(os.path.join(glob.escape(run_dir), pattern)):
                    os.remove(f)
        mark_run_dir(run_dir)
        add_file_log(run_dir)
        write_text(os.path.join(run_dir, "config.toml"), config_toml)
    except BaseException:
        lock.release()
        raise
    return lock


def remove_branch(branch, created):
    """Undo a branch that could not start: remove its vortexsim files (and the directory
    when this restart created it)."""
    remove_handlers()                 # run.log is closed before it is removed
    for pattern in (*OUR_FILES, RUN_MARKER, RUN_LOCK):
        for f in glob.glob(os.path.join(glob.escape(branch), pattern)):
            with contextlib.suppress(OSError):
                os.remove(f)
    if created:
        with contextlib.suppress(OSError):
            os.rmdir(branch)


def write_case_files(sim, run_dir, meta, history):
    """Write the case's own files (``CaseSetup.files``, e.g. ``initial_field.nc``) into the
    fresh run directory ``run_dir``, before the first step; a restart never rewrites
    them."""
    for name, write in getattr(sim, "case_files", {}).items():
        path = os.path.join(run_dir, name)
        try:
            write(path, sim.config, {"source": f"vortexsim {meta['vortexsim_version']}",
                                     "history": history})
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {os_error_text(exc, run_dir)}.") from None
        logger.info("wrote %s", path)


def run_metadata(sim, config_toml):
    from .. import __version__  # noqa: PLC0415
    from ..cases.registry import CASES  # noqa: PLC0415
    from ..output.cf import GENERIC_UNITS  # noqa: PLC0415
    cfg = sim.config
    case = CASES.get(cfg.get("case"))
    length_unit, time_unit = case.units if case is not None else GENERIC_UNITS
    return {"case": cfg.get("case"), "length_unit": length_unit, "time_unit": time_unit,
            "config": config_toml, "vortexsim_version": __version__,
            "device": sim.device.describe(), "precision": cfg.get("precision"),
            "kernel": cfg.get("kernel"), "method": cfg.get("method"),
            "tolerance": float(cfg.get("tol")), "integrator": cfg.get("integrator")}


def history_line(argv):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{now}: vortexsim {' '.join(shlex.quote(a) for a in argv)}"


def resolved_toml(sim, output):
    cfg = sim.config
    params = {k: v for k, v in cfg.items() if k not in DERIVED_KEYS and k not in CLI_ONLY}
    params.update(output)
    derived = {k: cfg[k] for k in ("t0", "n_elements", "n_tracers", "groups") if k in cfg}
    header = (f"vortexsim {cfg.get('case')}: resolved configuration (every value as run).\n"
              "Units: L length, T time (the case's units).  Repeat the run with: "
              "vortexsim run config.toml")
    return to_toml(cfg.get("case"), params, header=header, derived=derived)
