"""Test helpers for snapshot files: the checksum a file's content implies, as a forger (or
an older vortexsim) would compute it (vortexsim.output.snapshot.state_checksum)."""
import json

import numpy as np

from vortexsim.output.cf import TIME, with_current_names
from vortexsim.output.snapshot import _schedule_from_attrs, state_checksum


def content_checksum(ds, attrs):
    """The checksum of the snapshot dataset ``ds`` with global attributes ``attrs``, under
    the format that ``attrs["vortexsim_format_version"]`` says (1 to 4)."""
    ds = with_current_names(ds)
    state = {"t": float(ds[TIME].values[0]), "iteration": int(ds["iteration"].values[0]),
             "dt": float(ds["dt_next"].values[0]),
             "sigma_range": [float(v) for v in ds["sigma_range"].values[0]],
             "fmm_depth": int(ds["fmm_depth"].values[0]),
             "speed": float(ds["speed_last"].values[0]),
             "elements": {k: ds[f"element_{k}"].values[0] for k in ("x", "alpha", "sigma")},
             "tracers": {"x": ds["tracer_x"].values[0]}}
    if not np.isfinite(state["speed"]):
        state["speed"] = None
    if "step_strain_last" in ds.variables:
        state["step_strain"] = float(ds["step_strain_last"].values[0])
    version = int(attrs["vortexsim_format_version"])
    if version >= 3:
        state["elements"].update(volume=ds["element_volume"].values[0],
                                 group=ds["element_group"].values[0])
        state["groups"] = json.loads(attrs["groups_json"])["groups"]
    return state_checksum(state, attrs["config_json"], _schedule_from_attrs(attrs),
                          attrs if version >= 2 else None)
