"""The checksum of a snapshot (:func:`state_checksum`): SHA-256 over the state's numbers
and arrays, the config JSON, the schedule and (formats 2 and 3) the global attributes
:data:`CHECKSUM_ATTRS`, so that a restart refuses a file whose contents changed
(``vortexsim.output.snapshot`` writes and verifies it)."""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np

__all__ = ["CHECKSUM_ATTRS", "state_checksum", "has_groups", "groups_json"]

#: the global attributes that the checksum of format 2 covers besides the state,
#: ``config_json`` and the schedule (an absent one counts as absent)
CHECKSUM_ATTRS = ("vortexsim_format", "vortexsim_format_version", "snapshot_kind", "case",
                  "config", "vortexsim_version", "device", "precision", "kernel", "method",
                  "tolerance", "integrator")

def _le_buffer(a):
    """The little-endian bytes of the contiguous array ``a`` as a buffer (no copy when
    it is little-endian already)."""
    a = np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"), copy=False))
    return memoryview(a).cast("B") if a.size else b""


def state_checksum(state, config_json, schedule, attrs=None):
    """SHA-256 (hex) of a snapshot.

    Format 1 (``attrs`` None): the state's numbers (t, dt, σ range, iteration, FMM depth,
    last speed, the arrays with their dtypes), the config JSON text and the schedule.
    Format 2 (``attrs``: the global attributes): also the attributes
    :data:`CHECKSUM_ATTRS` of ``attrs``, so that an edited config TOML text (which a
    restart copies into its snapshots), case or kind is a mismatch too.  Format 3 (a
    state with ``elements["volume"]``, ``elements["group"]`` and ``groups``, and
    ``attrs``): also those (the groups as sorted-key JSON).
    """
    h = hashlib.sha256()
    scalars = np.array([state["t"], state["dt"], *state["sigma_range"]], dtype="<f8")
    h.update(scalars.tobytes())
    h.update(np.array([state["iteration"], state.get("fmm_depth", -1)], dtype="<i8").tobytes())
    if state.get("speed") is not None:           # snapshots from before it have none
        h.update(np.array([state["speed"]], dtype="<f8").tobytes())
    if math.isfinite(state.get("step_strain", math.nan)):     # nor this
        h.update(np.array([state["step_strain"]], dtype="<f8").tobytes())
    for arr in (state["elements"]["x"], state["elements"]["alpha"], state["elements"]["sigma"],
                state["tracers"]["x"]):
        a = np.ascontiguousarray(arr)
        h.update(str(a.dtype.str).encode())
        h.update(_le_buffer(a))
    h.update(config_json.encode())
    h.update(json.dumps(schedule, sort_keys=True, default=repr).encode())
    if has_groups(state):
        h.update(b"\0element sets\0")
        for arr in (state["elements"]["volume"], state["elements"]["group"]):
            a = np.ascontiguousarray(arr)
            h.update(str(a.dtype.str).encode())
            h.update(_le_buffer(a))
        h.update(groups_json(state["groups"]).encode())
    if attrs is not None:
        covered = [[k, _canonical(attrs[k])] if k in attrs else [k] for k in CHECKSUM_ATTRS]
        h.update(b"\0attributes\0")
        h.update(json.dumps(covered, default=repr).encode())
    return h.hexdigest()


def has_groups(state):
    """Whether ``state`` holds the element volumes, labels and groups (format 3)."""
    el = state["elements"]
    return "volume" in el and "group" in el and state.get("groups") is not None


def groups_json(groups):
    """The ``groups_json`` attribute of a list of group dicts."""
    return json.dumps({"groups": list(groups)}, sort_keys=True)


def _canonical(value):
    """An attribute's value as netCDF gives it back, in plain Python (for the checksum)."""
    if isinstance(value, np.ndarray):
        value = value.reshape(()).item() if value.size == 1 else value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    return int(value) if isinstance(value, bool) else value
