"""Run directories: the marker that makes a directory one, the files vortexsim writes
there (and only those are ever replaced or removed), preparing a fresh one, the metadata
and history of its files, the resolved ``config.toml`` and the case's own files."""
from __future__ import annotations

import contextlib
import datetime
import glob
import json
import logging
import os
import shlex
import stat

from ..config import CLI_ONLY, to_toml
from .common import UsageError, first_line
from .log import add_file_log, remove_handlers

__all__ = ["RUN_MARKER", "OUR_FILES", "DERIVED_KEYS", "is_run_dir", "our_files_size",
           "mark_run_dir", "prepare_run_dir", "remove_branch", "write_case_files",
           "run_metadata", "history_line", "resolved_toml"]

logger = logging.getLogger("vortexsim.cli")


#: the file that marks a directory as a run directory of vortexsim (written by every
#: ``vortexsim run``); ``--overwrite`` replaces only a directory that has it
RUN_MARKER = ".vortexsim-run"


DERIVED_KEYS = ("case", "t0", "groups", "n_elements", "n_tracers")


OUR_FILES = ("snapshot_*.nc", "diagnostics.nc", "spectra.nc", "plot.png", "config.toml",
              "run.log", ".snapshot_*.tmp", ".diagnostics.nc.*.tmp", ".spectra.nc.*.tmp",
              ".plot.png.*.tmp", ".config.toml.*.tmp", "initial_field.nc",
              ".initial_field.nc.*.tmp", "elements.xdmf", "tracers.xdmf", "xdmf_index.bin",
              ".elements.xdmf.*.tmp", ".tracers.xdmf.*.tmp", ".xdmf_index.bin.*.tmp")


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


def prepare_run_dir(run_dir, overwrite, config_toml):
    """Create ``run_dir`` with its marker (or, with ``overwrite``, remove vortexsim's files
    of the run directory there), start run.log and write config.toml."""
    from ..output import write_text  # noqa: PLC0415
    os.makedirs(run_dir, exist_ok=True)
    if overwrite:
        for pattern in OUR_FILES:
            for f in glob.glob(os.path.join(glob.escape(run_dir), pattern)):
                os.remove(f)
    mark_run_dir(run_dir)
    add_file_log(run_dir)
    write_text(os.path.join(run_dir, "config.toml"), config_toml)


def remove_branch(branch, created):
    """Undo a branch that could not start: remove its vortexsim files (and the directory
    when this restart created it)."""
    remove_handlers()                 # run.log is closed before it is removed
    for pattern in (*OUR_FILES, RUN_MARKER):
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
            raise UsageError(f"cannot write {path}: {exc.strerror or first_line(exc)}.") from None
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
