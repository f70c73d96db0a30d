r"""Snapshots: one netCDF4 file per output time, each a complete checkpoint.

Layout (xarray, engine netcdf4; ``xr.open_mfdataset("run/snapshot_*.nc")`` stacks them)::

    dimensions: t (1), element (N), tracer (M), component (3), bound (2)
    t (t)                             [T]      simulated time
    iteration (t)                     [1]      completed steps
    dt_next (t)                       [T]      the next step's dt (adaptive state)
    element_x (t, element, component) [L]      vortex element positions
    element_alpha (…)                 [L^3/T]  vector strengths α = ω V
    element_sigma (t, element)        [L]      core radii σ
    element_volume (t, element)       [L^3]    element volumes V (NaN: not known)  (format 3)
    element_group (t, element)        [1]      int64 group label (−1: none)        (format 3)
    tracer_x (t, tracer, component)   [L]      passive tracer positions
    sigma_range (t, bound)            [L]      min and max σ (exact running values)
    fmm_depth (t)                     [1]      FMM tree depth in use (−1: none yet)
    speed_last (t)                    [L/T]    max |u| of the last step (FMM root margin)
    step_strain_last (t)              [1]      dt max|grad u| of the last step (NaN: unknown)

and the global attribute ``groups_json`` (format 3) holds the element groups of the
state, ``{"groups": [{"name", "start", "stop", "circulation", "axis"}, ...]}``: group i
is the contiguous range ``[start, stop)`` of the elements labelled i.  With these a
snapshot restarts a run whose element set changed (remeshing in free space changes N);
formats 1 and 2 hold x, alpha, sigma only, so that their restart keeps the volumes and
groups of the case as built (and refuses another N).

Every variable has ``units`` "1", its dimension in the case's units (the brackets
above) in ``case_units``, and a ``long_name``; the time coordinate is ``t`` (format 4;
``time`` before, read the same): :mod:`.cf` says why, and ``compliance-checker --test
cf:1.10`` finds no error in these files.  Names and variable attributes are not covered
by the checksum, so files of formats 1 to 3 verify under theirs.  The global
attributes hold the CF ``Conventions``, ``history``, the case and its units
(``length_unit``, ``time_unit``), the resolved configuration (TOML text in
``config``, exact JSON in ``config_json``), the vortexsim version, device, precision,
kernel, method and tolerance, the output schedule of the run (``run_*``) and a SHA-256
checksum (:func:`state_checksum`) of the state, ``config_json``, the schedule, (formats
2 and 3) the attributes :data:`CHECKSUM_ATTRS`, the config TOML text among them, and
(format 3) the volumes, group labels and groups.  Arrays are
stored in their own dtype (float64: bitwise), so a restart from any snapshot continues
bitwise like the uninterrupted run.

:func:`read_snapshot` refuses (``SnapshotError``, one line) a missing, truncated,
corrupted or foreign file with a message that says which.  A file is input like any
other: every attribute and variable is checked for type, dtype and shape
before it is used (:mod:`.validate`), the checksum is verified under the file's format
(1, 2 or 3), and the values are checked even when the checksum matches, since a forged
file can recompute it: finite numbers, σ and dt > 0, volumes > 0 or NaN, group labels
in −1 .. (number of groups − 1) and group ranges that hold exactly the elements labelled
with them, a time at or after the run's t0 and
within ``iteration`` steps of dt, the stored config's parameters as a case file's
(:func:`vortexsim.config.check_params`), an output schedule of positive intervals that
owes at most a few outputs.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import os
import threading

import numpy as np

from . import validate as check
from .checksum import CHECKSUM_ATTRS, state_checksum
from .checksum import groups_json as _groups_json
from .checksum import has_groups as _has_groups
from .cf import OLD_TIME, TIME, time_attrs, unit_attrs, variable_attrs, with_current_names
from .files import atomic_path
from .netcdf_header import SnapshotError, check_declared_sizes, load_variables, read_header
from .validate import InvalidValue
from ..state import ElementGroup, check_group_ranges

logger = logging.getLogger(__name__)

__all__ = ["FORMAT", "FORMAT_VERSION", "SnapshotError", "ChecksumMismatch", "Snapshot",
           "write_snapshot", "read_snapshot", "read_snapshot_unverified", "open_netcdf",
           "state_checksum", "CHECKSUM_ATTRS", "preload_netcdf"]

FORMAT = "vortexsim snapshot"
#: 4: the time coordinate named ``t`` and units "1" with ``case_units`` (:mod:`.cf`; the
#: same contents and checksum as 3); 3: also the element volumes, group labels and groups
#: (``element_volume``, ``element_group``, ``groups_json``; covered by the checksum); 2:
#: the checksum also
#: covers the global attributes :data:`CHECKSUM_ATTRS` (the config TOML text among them);
#: 1: the state, ``config_json`` and the ``run_*`` schedule only.  All four are read
#: (each verified under its own checksum).
FORMAT_VERSION = 4
#: the variables that format 3 adds
_FORMAT_3_VARIABLES = ("element_volume", "element_group")
#: global attributes that are text when present (restart copies ``config`` and ``history``
#: into the snapshots it writes)
_TEXT_ATTRS = ("config", "history", "snapshot_kind", "case")
#: outputs a snapshot may still owe (its writes failed; the output thread holds at most
#: two pending writes): more would be written one per step after a restart
_MAX_OWED = 4
#: deepest FMM tree a snapshot may name (63-bit Morton keys: 21 levels, MAX_BITS of
#: vortexsim/kernels/morton.py, which this layer does not import)
_MAX_FMM_DEPTH = 21

#: name: (dims, units, long_name, state key)
_VARIABLES = {
    "element_x": ((TIME, "element", "component"), "L", "vortex element position"),
    "element_alpha": ((TIME, "element", "component"), "L^3/T",
                      "vortex element vector strength (vorticity x volume)"),
    "element_sigma": ((TIME, "element"), "L", "vortex element core radius"),
    "element_volume": ((TIME, "element"), "L^3", "vortex element volume (NaN: not known)"),
    "element_group": ((TIME, "element"), "1", "vortex element group: index into the "
                      "groups of groups_json (-1: none)"),
    "tracer_x": ((TIME, "tracer", "component"), "L", "passive tracer position"),
    "iteration": ((TIME,), "1", "number of completed time steps"),
    "dt_next": ((TIME,), "T", "time step of the next step (adaptive time-step state)"),
    "sigma_range": ((TIME, "bound"), "L", "smallest and largest core radius"),
    "fmm_depth": ((TIME,), "1", "FMM tree depth in use, reused until the next refresh "
                  "(-1: none chosen yet)"),
    "speed_last": ((TIME,), "L/T", "largest speed over the stages of the last step "
                   "(sets the FMM root-cube margin of the next)"),
    "step_strain_last": ((TIME,), "1", "dt max |grad u| of the last step (NaN: not known)"),
}
#: variables that snapshots written before them lack (read as NaN)
_OPTIONAL = ("step_strain_last",)


class ChecksumMismatch(SnapshotError):
    """A snapshot whose checksum does not match its contents (corrupted or edited)."""


@dataclasses.dataclass
class Snapshot:
    """What :func:`read_snapshot` returns.

    state : dict in the form of :meth:`vortexsim.Simulation.state_dict`
    config : dict, the simulation's resolved config (``sim.config``)
    schedule : dict, the output schedule of the run (``run_*`` attributes, prefix dropped)
    attrs : dict, all global attributes
    """

    path: str
    state: dict
    config: dict
    schedule: dict
    attrs: dict

    @property
    def t(self):
        return self.state["t"]

    @property
    def iteration(self):
        return self.state["iteration"]


def _schedule_attrs(schedule):
    out = {}
    for k, v in schedule.items():
        if v is None:
            v = "none"
        elif isinstance(v, bool):
            v = int(v)
        out[f"run_{k}"] = v
    return out


def _schedule_from_attrs(attrs):
    out = {}
    for k, v in attrs.items():
        if not k.startswith("run_"):
            continue
        if isinstance(v, str):
            v = None if v == "none" else v
        elif isinstance(v, np.ndarray):
            v = v.item() if v.size == 1 else v.tolist()
        elif isinstance(v, np.generic):
            v = v.item()
        out[k[4:]] = v
    return out


def write_snapshot(path, state, config, meta, schedule, kind="scheduled", history=""):
    """Write one snapshot atomically.

    Parameters
    ----------
    path : str, the ``.nc`` file (replaced atomically if it exists)
    state : dict, :meth:`vortexsim.Simulation.state_dict` (with the element volumes,
        group labels and groups)
    config : dict, ``sim.config`` (JSON-able)
    meta : dict of global attributes (case, config TOML text, version, device, precision,
        kernel, method, tolerance, …)
    schedule : dict of ints/floats/None: the run's output schedule (restored on restart)
    kind : "scheduled" | "final" | "interrupted" | "last_good_state" | "error"
    history : str, the CF ``history`` text
    """
    import xarray as xr  # noqa: PLC0415

    el, tr = state["elements"], state["tracers"]
    data = {
        "element_x": np.asarray(el["x"])[None],
        "element_alpha": np.asarray(el["alpha"])[None],
        "element_sigma": np.asarray(el["sigma"])[None],
        "element_volume": np.asarray(el["volume"], dtype=np.float64)[None],
        "element_group": np.asarray(el["group"], dtype=np.int64)[None],
        "tracer_x": np.asarray(tr["x"]).reshape(-1, 3)[None],
        "iteration": np.array([state["iteration"]], dtype=np.int64),
        "dt_next": np.array([state["dt"]], dtype=np.float64),
        "sigma_range": np.array([state["sigma_range"]], dtype=np.float64),
        "fmm_depth": np.array([state.get("fmm_depth", -1)], dtype=np.int64),
        "speed_last": np.array([np.nan if state.get("speed") is None else state["speed"]],
                               dtype=np.float64),
        "step_strain_last": np.array([state.get("step_strain", np.nan)], dtype=np.float64),
    }
    config_json = json.dumps(config)
    ds = xr.Dataset(
        {name: (dims, data[name], variable_attrs(units, long))
         for name, (dims, units, long) in _VARIABLES.items()},
        coords={TIME: (TIME, np.array([state["t"]], dtype=np.float64),
                       time_attrs())})
    ds["element_x"].attrs["ring_groups"] = json.dumps(config.get("groups", []))
    attrs = {
        "Conventions": "CF-1.10",
        "title": f"vortexsim snapshot of case {meta.get('case')} at t = {state['t']:.10g}",
        "history": history,
        "source": f"vortexsim {meta.get('vortexsim_version', '')}",
        "vortexsim_format": FORMAT,
        "vortexsim_format_version": FORMAT_VERSION,
        "snapshot_kind": kind,
        **{k: ("none" if v is None else v) for k, v in meta.items()},
        **unit_attrs(meta),
        "config_json": config_json,
        "groups_json": _groups_json(state["groups"]),
        **_schedule_attrs(schedule),
    }
    ds.attrs.update(attrs)
    encoding = {name: {"_FillValue": None} for name in list(ds.data_vars) + [TIME]}
    # The checksum (SHA-256 over the arrays) is computed on a thread while the file is
    # written, both reading the same arrays and both releasing the GIL (300 MB on 2
    # cores: 0.34 s one after the other, 0.18 s together); it is added to the file,
    # still temporary, once both are done.
    digest = _Digest(state, config_json, _schedule_from_attrs(_schedule_attrs(schedule)),
                     attrs)
    with atomic_path(path) as tmp:
        try:
            ds.to_netcdf(tmp, engine="netcdf4", format="NETCDF4", encoding=encoding)
        finally:
            checksum = digest.result()
        import netCDF4  # noqa: PLC0415
        with netCDF4.Dataset(tmp, "a") as nc:
            nc.setncattr("checksum_sha256", checksum)
    logger.debug("wrote %s (%s, t = %.6g, iteration %d)", path, kind, state["t"],
                 state["iteration"])
    return path


class _Digest:
    """:func:`~vortexsim.output.checksum.state_checksum` of its arguments on a thread of
    its own; :meth:`result` waits for it (and raises its error)."""

    def __init__(self, *args):
        self._out = {}
        self._thread = threading.Thread(target=self._run, args=args, daemon=True,
                                        name="vortexsim-snapshot-checksum")
        self._thread.start()

    def _run(self, *args):
        try:
            self._out["hex"] = state_checksum(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to result()
            self._out["error"] = exc

    def result(self):
        self._thread.join()
        if "error" in self._out:
            raise self._out["error"]
        return self._out["hex"]


@functools.cache
def preload_netcdf():
    """Import xarray, netCDF4 and xarray's backends once per process, ahead of the first
    write: a writer calls it when a run starts, before the first step.  On a thread
    beside the steps these imports (~0.5 s of Python, pandas and pyarrow among them)
    held the GIL that the stepping thread needs to launch its kernels: on an H100 the
    first leapfrog GPU step took 0.45 s instead of 0.1 s.  Returns netCDF4's version."""
    import netCDF4  # noqa: PLC0415
    import xarray as xr  # noqa: PLC0415

    xr.backends.list_engines()
    return netCDF4.__version__


def open_netcdf(path, variables=None, expected_dims=None):
    """Open a netCDF file with xarray (engine netcdf4, no decoding) and load the
    ``variables`` (those present; None: all) and no other, or raise
    :class:`SnapshotError` saying that it is missing, not a regular file, truncated,
    corrupted, not netCDF, larger in memory than the memory available, or that a
    variable declares more values than the file can hold or a dimension another length
    than ``expected_dims`` (:func:`.netcdf_header.check_declared_sizes`: a file can
    declare huge variables that it does not store)."""
    header = read_header(path)
    names = list(header.variables) if variables is None else \
        [v for v in variables if v in header.variables]
    _check_memory(header.path, sum(header.declared_bytes(v) for v in names))
    check_declared_sizes(header, expected_dims)
    return load_variables(header, names)


def _check_memory(path, need):
    """SnapshotError when loading ``need`` bytes of variables would take more than the
    memory available now (Linux's MemAvailable; no check where it is unknown)."""
    available = _available_memory()
    if available is not None and need > available:
        raise SnapshotError(f"{path} declares variables of {need / 2**30:.3g} GiB, more than "
                            f"the {available / 2**30:.3g} GiB of memory available; it is not "
                            "a snapshot of this machine's size (or it is corrupted).")


def _available_memory():
    """Bytes of memory available (``MemAvailable`` of /proc/meminfo), or None."""
    from ..backend.memory import meminfo_available  # noqa: PLC0415
    return meminfo_available()


def read_snapshot(path):
    """Read a snapshot for a restart (:class:`Snapshot`), after checking it.

    Raises :class:`SnapshotError` (one line: what is wrong and what to do) for a missing,
    unreadable (truncated, corrupted) or foreign file, a diagnostics file, a newer
    format, missing variables or attributes, any attribute or variable of the wrong type,
    dtype or shape (``config_json`` that is not a JSON object, ``n_elements`` that is not
    an integer, arrays that do not match the config, ...), a checksum mismatch, and,
    even when the checksum matches (a forged file can recompute it), values that no run
    writes: non-finite numbers, σ or dt ≤ 0, a time before the run's t0 or beyond
    ``iteration`` steps of dt, an output schedule in the past, invalid stored config
    values (:func:`vortexsim.config.check_params`).

    Format 1 files are verified under the checksum of format 1 (which does not cover the
    config TOML text), format 2 and 3 files under their own; the state of a format 1 or
    2 file has no element volumes, group labels and groups (a restart keeps the case's).
    """
    snap, mismatch = read_snapshot_unverified(path)
    if mismatch:
        raise ChecksumMismatch(f"{mismatch} Restart from another snapshot of the run.")
    state, config, schedule, path = snap.state, snap.config, snap.schedule, snap.path
    try:
        _check_values(state, config, schedule)
    except InvalidValue as exc:
        raise SnapshotError(f"{path}: {exc}, although the checksum matches: the file was "
                            "forged or written by a faulty program. Restart from another "
                            "snapshot of the run.") from None
    return snap


def read_snapshot_unverified(path):
    """``(snapshot, mismatch)``: the :class:`Snapshot` of ``path`` read and checked like
    :func:`read_snapshot` but for its values, and, when its checksum does not match, the
    one-line text that says so (else None); what the commands that only look at a file
    need (they verify the checksum, or warn and go on).  Only the variables of a
    snapshot are read; a file that declares more than it can hold, or dimensions other
    than the counts it records, is refused before any value is read
    (:func:`.netcdf_header.check_declared_sizes`)."""
    path = os.fspath(path)
    ds = open_netcdf(path, [*_VARIABLES, TIME, OLD_TIME], _recorded_dims(path))
    attrs = dict(ds.attrs)
    _check_format(path, attrs)
    # a newer format may have other contents: its version is reported first
    version = _format_version(path, attrs) if "vortexsim_format_version" in attrs else None
    since_3 = () if version is not None and version < 3 else _FORMAT_3_VARIABLES
    ds = with_current_names(ds)                 # "time" in formats 1 to 3
    missing = [v for v in list(_VARIABLES) + [TIME] if v not in ds.variables and
               v not in _OPTIONAL and (v not in _FORMAT_3_VARIABLES or v in since_3)] + \
        [a for a in ("vortexsim_format_version", "config_json", "checksum_sha256") +
         (("groups_json",) if since_3 else ()) if a not in attrs]
    if missing:
        raise SnapshotError(f"{path} is an incomplete vortexsim snapshot (missing "
                            f"{', '.join(missing)}); it is corrupted.")
    try:
        checksum, config, state = _parse(ds, attrs, version)
    except InvalidValue as exc:
        raise SnapshotError(f"{path}: {exc}; the file is corrupted or was not written by "
                            "vortexsim.") from None
    schedule = _schedule_from_attrs(attrs)
    mismatch = None
    if state_checksum(state, attrs["config_json"], schedule,
                      attrs if version >= 2 else None) != checksum:
        covers = "numbers, configuration" if version >= 2 else "numbers, config_json"
        mismatch = (f"{path}: checksum mismatch; the file is corrupted or was edited (its "
                    f"{covers} or schedule are not those that were written).")
    return Snapshot(path, state, config, schedule, attrs), mismatch


def _recorded_dims(path):
    """The dimension lengths that the snapshot ``path`` records of itself: one time, 3
    components, 2 bounds and, when its ``config_json`` holds them as integers, its
    element and tracer counts ({} for a file that is not a snapshot: its reader says
    so)."""
    attrs = read_header(path).attrs
    fmt = attrs.get("vortexsim_format")
    if not isinstance(fmt, str) or fmt != FORMAT:
        return {}
    layout = "snapshot layout"
    dims = {TIME: (1, layout), OLD_TIME: (1, layout), "component": (3, layout),
            "bound": (2, layout)}
    try:
        config = check.json_object("config_json", attrs.get("config_json"))
        for dim, key in (("element", "n_elements"), ("tracer", "n_tracers")):
            dims[dim] = (check.integer(key, config.get(key), minimum=0),
                         f"{key} of config_json")
    except InvalidValue:
        pass                      # the reader names what is wrong with config_json
    return dims


def _check_format(path, attrs):
    """SnapshotError unless ``attrs`` say that the file is a vortexsim snapshot."""
    fmt = attrs.get("vortexsim_format")
    if not isinstance(fmt, str) or fmt != FORMAT:
        if isinstance(fmt, str) and fmt.startswith("vortexsim"):
            raise SnapshotError(f"{path} is a {check.printable(fmt)} file, not a snapshot; "
                                "restart from one of the run's snapshot_*.nc files.")
        what = ("no vortexsim_format attribute" if fmt is None else
                f"vortexsim_format = {check.show(fmt)}")
        raise SnapshotError(f"{path} is not a vortexsim snapshot (foreign netCDF file: "
                            f"{what}); restart from a snapshot_*.nc that vortexsim wrote.")


def _format_version(path, attrs):
    """The snapshot format version of ``attrs`` (1 or 2), or SnapshotError for a version
    that is not a whole number in range."""
    raw = attrs.get("vortexsim_format_version")
    try:
        version = check.integer("vortexsim_format_version", raw)
    except InvalidValue as exc:
        raise SnapshotError(f"{path}: {exc}; the file is corrupted.") from None
    if version > FORMAT_VERSION:
        raise SnapshotError(f"{path} has snapshot format {version}; this vortexsim reads up to "
                            f"{FORMAT_VERSION}. Upgrade vortexsim.")
    if version < 1:
        raise SnapshotError(f"{path}: vortexsim_format_version = {version}, expected 1 to "
                            f"{FORMAT_VERSION}; the file is corrupted.")
    return version


def _parse(ds, attrs, version):
    """(checksum, config, state) of a snapshot of format ``version``: every attribute and
    variable checked for type, dtype and shape (:class:`InvalidValue` otherwise); values
    are checked later."""
    checksum = check.text("checksum_sha256", attrs["checksum_sha256"])
    if len(checksum) != 64 or set(checksum) - set("0123456789abcdef"):
        raise InvalidValue(f"checksum_sha256 = {check.show(checksum)} is not a SHA-256 "
                           "(64 hex digits)")
    for name in _TEXT_ATTRS:
        if name in attrs:
            check.text(name, attrs[name])
    config = check.json_object("config_json", attrs["config_json"])
    n = check.integer("n_elements of config_json", config.get("n_elements"), minimum=0)
    m = check.integer("n_tracers of config_json", config.get("n_tracers"), minimum=0)
    shapes = {"element_x": ((1, n, 3), "f"), "element_alpha": ((1, n, 3), "f"),
              "element_sigma": ((1, n), "f"), "tracer_x": ((1, m, 3), "f"),
              TIME: ((1,), "f"), "iteration": ((1,), "iu"), "dt_next": ((1,), "f"),
              "sigma_range": ((1, 2), "f"), "fmm_depth": ((1,), "iu"),
              "speed_last": ((1,), "f")}
    if version >= 3:
        shapes.update(element_volume=((1, n), "f"), element_group=((1, n), "iu"))
    shapes.update({k: ((1,), "f") for k in _OPTIONAL if k in ds.variables})
    v = {name: check.array(name, ds[name].values, shape, kinds)
         for name, (shape, kinds) in shapes.items()}
    speed = v["speed_last"][0]
    state = {
        "t": float(v[TIME][0]),
        "iteration": check.integer("iteration", v["iteration"][0]),
        "dt": float(v["dt_next"][0]),
        "sigma_range": [float(x) for x in v["sigma_range"][0]],
        "fmm_depth": check.integer("fmm_depth", v["fmm_depth"][0]),
        "speed": float(speed) if np.isfinite(speed) else None,
        "elements": {"x": np.array(v["element_x"][0]), "alpha": np.array(v["element_alpha"][0]),
                     "sigma": np.array(v["element_sigma"][0])},
        "tracers": {"x": np.array(v["tracer_x"][0])},
        "step_strain": float(v["step_strain_last"][0]) if "step_strain_last" in v else math.nan,
    }
    if version >= 3:
        state["elements"].update(volume=np.array(v["element_volume"][0]),
                                 group=np.array(v["element_group"][0], dtype=np.int64))
        state["groups"] = _parse_groups(attrs["groups_json"])
    if not np.isnan(speed) and not np.isfinite(speed):
        raise InvalidValue(f"speed_last = {check.show(speed)}, expected a finite number or NaN")
    return checksum, config, state


def _parse_groups(raw):
    """The list of group dicts of the ``groups_json`` attribute, each checked for its
    keys and their types (:class:`InvalidValue` otherwise)."""
    groups = check.json_object("groups_json", raw).get("groups")
    if not isinstance(groups, list):
        raise InvalidValue(f"groups_json: groups = {check.show(groups)}, expected a list")
    out = []
    for i, g in enumerate(groups):
        where = f"group {i} of groups_json"
        if not isinstance(g, dict) or set(g) != {"name", "start", "stop", "circulation",
                                                 "axis"}:
            raise InvalidValue(f"{where} = {check.show(g)}, expected an object with name, "
                               "start, stop, circulation, axis")
        name = check.text(f"name of {where}", g["name"])
        if not name.isprintable():
            raise InvalidValue(f"name of {where} = {check.show(name)}, text with control "
                               "characters")
        start = check.integer(f"start of {where}", g["start"], minimum=0)
        stop = check.integer(f"stop of {where}", g["stop"], minimum=start + 1)
        circulation = None if g["circulation"] is None else \
            check.number(f"circulation of {where}", g["circulation"])
        axis = g["axis"]
        if axis is not None:
            if not isinstance(axis, list) or len(axis) != 3:
                raise InvalidValue(f"axis of {where} = {check.show(axis)}, expected 3 "
                                   "numbers or null")
            axis = [check.number(f"axis of {where}", a) for a in axis]
        out.append({"name": name, "start": start, "stop": stop, "circulation": circulation,
                    "axis": axis})
    return out


def _check_values(state, config, schedule):
    """Values that no run writes (after the checksum matched): :class:`InvalidValue`."""
    from ..config import PARAMETERS, ConfigError, check_params  # noqa: PLC0415

    # the stored config: the case-file parameters it holds, and the derived t0 and groups
    case = config.get("case")
    if case is not None:
        check.text("case of config_json", case)
    for key, value in config.items():   # names and words, never terminal control sequences
        for what in (key, value):
            if isinstance(what, str) and not what.isprintable():
                raise InvalidValue(f"config_json holds {check.show(what)}, text with control "
                                   "characters")
    params = {k: v for k, v in config.items() if k in PARAMETERS and v is not None}
    try:
        check_params(params, config, "config_json: ")
    except ConfigError as exc:
        raise InvalidValue(" ".join(str(exc).rstrip(".").split())) from None
    t0 = None if config.get("t0") is None else check.number("t0 of config_json", config["t0"])
    if "groups" in config and not isinstance(config["groups"], list):
        raise InvalidValue(f"groups of config_json = {check.show(config['groups'])}, expected "
                           "a list")
    dt_max = config.get("dt") if isinstance(config.get("dt"), (int, float)) else None

    # the state
    t = check.number("time", state["t"])
    n = state["iteration"]
    if n < 0:
        raise InvalidValue(f"iteration = {n}, expected >= 0")
    dt = check.number("dt_next", state["dt"], positive=True)
    if dt_max is not None and dt > dt_max * (1 + 1e-9):
        raise InvalidValue(f"dt_next = {dt!r} exceeds the config's dt = {dt_max!r}")
    lo, hi = (check.number("sigma_range", x, positive=True) for x in state["sigma_range"])
    if lo > hi:
        raise InvalidValue(f"sigma_range = [{lo!r}, {hi!r}] has min > max")
    if not -1 <= state["fmm_depth"] <= _MAX_FMM_DEPTH:
        raise InvalidValue(f"fmm_depth = {state['fmm_depth']}, expected -1 (none) to "
                           f"{_MAX_FMM_DEPTH}")
    for name, v in (("speed_last", state["speed"]), ("step_strain_last", state["step_strain"])):
        if v is not None and not (math.isnan(v) or 0 <= v < math.inf):
            raise InvalidValue(f"{name} = {v!r}, expected >= 0 (or NaN: not known)")
    el = state["elements"]
    for name, values, positive in (("element_x", el["x"], False),
                                   ("element_alpha", el["alpha"], False),
                                   ("element_sigma", el["sigma"], True),
                                   ("tracer_x", state["tracers"]["x"], False)):
        check.array(name, values, values.shape, "f", finite=True, positive=positive)
    if _has_groups(state):                           # format 3
        check.array("element_volume", el["volume"], el["volume"].shape, "f", finite=True,
                    positive=True, allow_nan=True)
        try:
            check_group_ranges([ElementGroup.from_dict(g) for g in state["groups"]],
                               el["group"])
        except ValueError as exc:
            raise InvalidValue(f"element_group and groups_json disagree: {exc}") from None

    # the output schedule (run_* attributes)
    s = schedule
    for key in ("t0", "stop_time"):
        if s.get(key) is not None:
            check.number(f"run_{key}", s[key])
    for key in ("snapshot_interval", "diagnostics_interval"):
        if s.get(key) is not None:
            check.number(f"run_{key}", s[key], positive=True)
    for key in ("next_snapshot", "next_diagnostics", "diagnostics_rows", "stop_iteration"):
        if s.get(key) is not None:
            check.integer(f"run_{key}", s[key], minimum=0)
    if s.get("plot") is not None:
        check.integer("run_plot", s["plot"], minimum=0, maximum=1)
    if s.get("state_json") is not None:
        state_json = check.json_object("run_state_json", s["state_json"])
        for key in ("output_writers", "callbacks"):
            if not isinstance(state_json.get(key, {}), dict):
                raise InvalidValue(f"run_state_json: {key} = {check.show(state_json[key])}, "
                                   "expected a JSON object")

    # time against the run's start, the steps taken and the schedule
    for name, start in (("t0 of config_json", t0), ("run_t0", s.get("t0"))):
        if start is None:
            continue
        start = float(start)
        if t < start:
            raise InvalidValue(f"time = {t!r} is before the run's start ({name} = {start!r})")
        if dt_max is not None and t - start > n * dt_max * (1 + 1e-6) + 1e-9 * max(1.0, abs(start)):
            raise InvalidValue(f"time = {t!r} is beyond {n} steps of at most dt = {dt_max!r} "
                               f"from the run's start {start!r}")
    if s.get("t0") is not None:
        # an output may be owed (a write that failed is written again by the restart), but
        # not more than the few that can be pending: each owed one is written at a step
        slack = 1e-10 * max(1.0, abs(t))
        for key, next_key in (("snapshot_interval", "next_snapshot"),
                              ("diagnostics_interval", "next_diagnostics")):
            if s.get(key) is not None and s.get(next_key) is not None:
                interval = float(s[key])
                target = float(s["t0"]) + int(s[next_key]) * interval
                if target < t - _MAX_OWED * interval * (1 + 1e-9) - slack:
                    raise InvalidValue(f"run_{next_key} = {s[next_key]} puts the next output "
                                       f"at t = {target!r}, more than {_MAX_OWED} intervals "
                                       f"of {interval!r} before the snapshot's t = {t!r}")
