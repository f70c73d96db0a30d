r"""Snapshots: one netCDF4 file per output time, each a complete checkpoint.

Layout (xarray, engine netcdf4; ``xr.open_mfdataset("run/snapshot_*.nc")`` stacks them)::

    dimensions: time (1), element (N), tracer (M), component (3), bound (2)
    time (time)                          [T]      simulated time t
    iteration (time)                     [1]      completed steps
    dt_next (time)                       [T]      the next step's dt (adaptive state)
    element_x (time, element, component) [L]      vortex element positions
    element_alpha (…)                    [L^3/T]  vector strengths α = ω V
    element_sigma (time, element)        [L]      core radii σ
    tracer_x (time, tracer, component)   [L]      passive tracer positions
    sigma_range (time, bound)            [L]      min and max σ (exact running values)
    fmm_depth (time)                     [1]      FMM tree depth in use (−1: none yet)
    speed_last (time)                    [L/T]    max |u| of the last step (FMM root margin)

Every variable has ``units`` and ``long_name``; the global attributes hold the CF
``Conventions``, ``history``, the case, the resolved configuration (TOML text in
``config``, exact JSON in ``config_json``), the vortexsim version, device, precision,
kernel, method and tolerance, the output schedule of the run (``run_*``) and a SHA-256
checksum of the state.  Arrays are stored in their own dtype (float64: bitwise), so a
restart from any snapshot continues bitwise like the uninterrupted run.

:func:`read_snapshot` refuses (``SnapshotError``) a missing, truncated, corrupted or
foreign file with a message that says which.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os

import numpy as np

from .files import atomic_path

logger = logging.getLogger(__name__)

__all__ = ["FORMAT", "FORMAT_VERSION", "SnapshotError", "Snapshot", "write_snapshot",
           "read_snapshot", "state_checksum", "UNITS_NOTE"]

FORMAT = "vortexsim snapshot"
FORMAT_VERSION = 1
UNITS_NOTE = ("Units are the case's: L (length) and T (time), e.g. L = ring radius and "
              "T = R^2/Gamma for the ring cases; L^3/T is vorticity x volume.")

#: name: (dims, units, long_name, state key)
_VARIABLES = {
    "element_x": (("time", "element", "component"), "L", "vortex element position"),
    "element_alpha": (("time", "element", "component"), "L^3/T",
                      "vortex element vector strength (vorticity x volume)"),
    "element_sigma": (("time", "element"), "L", "vortex element core radius"),
    "tracer_x": (("time", "tracer", "component"), "L", "passive tracer position"),
    "iteration": (("time",), "1", "number of completed time steps"),
    "dt_next": (("time",), "T", "time step of the next step (adaptive time-step state)"),
    "sigma_range": (("time", "bound"), "L", "smallest and largest core radius"),
    "fmm_depth": (("time",), "1", "FMM tree depth in use, reused until the next refresh "
                  "(-1: none chosen yet)"),
    "speed_last": (("time",), "L/T", "largest speed over the stages of the last step "
                   "(sets the FMM root-cube margin of the next)"),
}


class SnapshotError(ValueError):
    """A file that cannot be restarted from (missing, truncated, corrupted or foreign)."""


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


def state_checksum(state, config_json, schedule):
    """SHA-256 (hex) of the state's numbers, the config JSON and the schedule."""
    h = hashlib.sha256()
    scalars = np.array([state["t"], state["dt"], *state["sigma_range"]], dtype="<f8")
    h.update(scalars.tobytes())
    h.update(np.array([state["iteration"], state.get("fmm_depth", -1)], dtype="<i8").tobytes())
    if state.get("speed") is not None:           # snapshots from before it have none
        h.update(np.array([state["speed"]], dtype="<f8").tobytes())
    for arr in (state["elements"]["x"], state["elements"]["alpha"], state["elements"]["sigma"],
                state["tracers"]["x"]):
        a = np.ascontiguousarray(arr)
        h.update(str(a.dtype.str).encode())
        h.update(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
    h.update(config_json.encode())
    h.update(json.dumps(schedule, sort_keys=True).encode())
    return h.hexdigest()


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
    state : dict, :meth:`vortexsim.Simulation.state_dict`
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
        "tracer_x": np.asarray(tr["x"]).reshape(-1, 3)[None],
        "iteration": np.array([state["iteration"]], dtype=np.int64),
        "dt_next": np.array([state["dt"]], dtype=np.float64),
        "sigma_range": np.array([state["sigma_range"]], dtype=np.float64),
        "fmm_depth": np.array([state.get("fmm_depth", -1)], dtype=np.int64),
        "speed_last": np.array([np.nan if state.get("speed") is None else state["speed"]],
                               dtype=np.float64),
    }
    config_json = json.dumps(config)
    ds = xr.Dataset(
        {name: (dims, data[name], {"units": units, "long_name": long})
         for name, (dims, units, long) in _VARIABLES.items()},
        coords={"time": ("time", np.array([state["t"]], dtype=np.float64),
                         {"units": "T", "long_name": "simulated time", "axis": "T"})})
    ds["element_x"].attrs["ring_groups"] = json.dumps(config.get("groups", []))
    attrs = {
        "Conventions": "CF-1.10",
        "title": f"vortexsim snapshot of case {meta.get('case')} at t = {state['t']:.10g}",
        "history": history,
        "source": f"vortexsim {meta.get('vortexsim_version', '')}",
        "units_note": UNITS_NOTE,
        "vortexsim_format": FORMAT,
        "vortexsim_format_version": FORMAT_VERSION,
        "snapshot_kind": kind,
        **{k: ("none" if v is None else v) for k, v in meta.items()},
        "config_json": config_json,
        **_schedule_attrs(schedule),
        "checksum_sha256": state_checksum(state, config_json,
                                          _schedule_from_attrs(_schedule_attrs(schedule))),
    }
    ds.attrs.update(attrs)
    encoding = {name: {"_FillValue": None} for name in list(ds.data_vars) + ["time"]}
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp, engine="netcdf4", format="NETCDF4", encoding=encoding)
    logger.debug("wrote %s (%s, t = %.6g, iteration %d)", path, kind, state["t"],
                 state["iteration"])
    return path


def open_netcdf(path):
    """Open and load a netCDF file with xarray (engine netcdf4, no decoding), or raise
    :class:`SnapshotError` saying that it is missing, truncated, corrupted or not netCDF."""
    import xarray as xr  # noqa: PLC0415

    path = os.fspath(path)
    if not os.path.exists(path):
        raise SnapshotError(f"{path} does not exist.")
    if os.path.isdir(path):
        raise SnapshotError(f"{path} is a directory; give a snapshot file (snapshot_*.nc).")
    try:
        with xr.open_dataset(path, engine="netcdf4", decode_times=False, decode_cf=False,
                             mask_and_scale=False) as ds:
            return ds.load()
    except Exception as exc:  # noqa: BLE001 - any reader error means the same to the user
        size = os.path.getsize(path)
        raise SnapshotError(
            f"cannot read {path} ({size} bytes) as netCDF: the file is truncated, corrupted "
            f"or not netCDF ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})."
        ) from None


def read_snapshot(path):
    """Read a snapshot for a restart (:class:`Snapshot`), after checking it.

    Raises :class:`SnapshotError` for a missing, unreadable (truncated, corrupted) or
    foreign file, a diagnostics file, a newer format, missing variables, shapes that
    do not match the config, or a checksum mismatch.
    """
    path = os.fspath(path)
    ds = open_netcdf(path)
    attrs = dict(ds.attrs)
    fmt = attrs.get("vortexsim_format")
    if fmt != FORMAT:
        if isinstance(fmt, str) and fmt.startswith("vortexsim"):
            raise SnapshotError(f"{path} is a {fmt} file, not a snapshot; restart from one of "
                                "the run's snapshot_*.nc files.")
        raise SnapshotError(f"{path} is not a vortexsim snapshot (foreign netCDF file: no "
                            "vortexsim_format attribute); restart from a snapshot_*.nc that "
                            "vortexsim wrote.")
    version = int(attrs.get("vortexsim_format_version", 0))
    if version > FORMAT_VERSION:
        raise SnapshotError(f"{path} has snapshot format {version}; this vortexsim reads up to "
                            f"{FORMAT_VERSION}. Upgrade vortexsim.")
    missing = [v for v in list(_VARIABLES) + ["time"] if v not in ds.variables]
    if missing or "config_json" not in attrs or "checksum_sha256" not in attrs:
        raise SnapshotError(f"{path} is an incomplete vortexsim snapshot (missing "
                            f"{missing or 'config_json/checksum_sha256'}); it is corrupted.")
    try:
        config = json.loads(attrs["config_json"])
    except ValueError:
        raise SnapshotError(f"{path}: the stored config is not valid JSON; the file is "
                            "corrupted.") from None
    n, m = int(config.get("n_elements", -1)), int(config.get("n_tracers", -1))
    want = {"element_x": (1, n, 3), "element_alpha": (1, n, 3), "element_sigma": (1, n),
            "tracer_x": (1, m, 3), "iteration": (1,), "dt_next": (1,), "sigma_range": (1, 2),
            "time": (1,)}
    for name, shape in want.items():
        if tuple(ds[name].shape) != shape:
            raise SnapshotError(f"{path}: {name} has shape {tuple(ds[name].shape)}, expected "
                                f"{shape} from its config; the file is corrupted.")
    state = {
        "t": float(ds["time"].values[0]),
        "iteration": int(ds["iteration"].values[0]),
        "dt": float(ds["dt_next"].values[0]),
        "sigma_range": [float(v) for v in ds["sigma_range"].values[0]],
        "fmm_depth": int(ds["fmm_depth"].values[0]) if "fmm_depth" in ds else -1,
        "speed": (float(ds["speed_last"].values[0]) if "speed_last" in ds
                  and np.isfinite(ds["speed_last"].values[0]) else None),
        "elements": {"x": np.array(ds["element_x"].values[0]),
                     "alpha": np.array(ds["element_alpha"].values[0]),
                     "sigma": np.array(ds["element_sigma"].values[0])},
        "tracers": {"x": np.array(ds["tracer_x"].values[0])},
    }
    schedule = _schedule_from_attrs(attrs)
    if state_checksum(state, attrs["config_json"], schedule) != attrs["checksum_sha256"]:
        raise SnapshotError(f"{path}: checksum mismatch; the file is corrupted (its numbers "
                            "are not those that were written).")
    return Snapshot(path, state, config, schedule, attrs)
