r"""A velocity field on the n³ lattice of the periodic box as a netCDF file.

The file that carries one velocity field between vortexsim and other codes: the initial
field of a case (``initial_field.nc`` of an ``isotropic_turbulence`` run directory) and the
fields that ``vortexsim.validation.spectral_ns`` reads (``--init``) and writes
(``--save-field``), so that the spectral code starts from exactly the field vortexsim
started from, and the other way round.

Format ``periodic-velocity-field``, version 1 (xarray, engine netcdf4)
----------------------------------------------------------------------
* dimensions ``x``, ``y``, ``z`` of size n each; coordinates x = i L/n (i = 0..n−1, the
  same in y and z), of dimension L, optional (when present they must be this lattice);
  written without a CF ``axis`` (X/Y/Z would mean earth coordinates: the file passes
  ``compliance-checker --test cf:1.10`` without errors);
* velocity: either the three variables ``u``, ``v``, ``w`` with dims (x, y, z), or one
  variable ``velocity`` with dims (component, x, y, z) and component of size 3; float64,
  of dimension L/T; data in any dimension order (transposed by name);
* global attributes: ``box`` (L, the period; if absent, n times the x coordinate spacing,
  else the ``box`` argument of the reader), optional ``time`` (T) and free text;
* :func:`write_velocity_field` writes ``u``, ``v``, ``w`` (x, y, z) with coordinates,
  ``units`` "1" and the dimension in ``case_units`` (:mod:`.cf`), and ``long_name`` on
  every variable (the reader ignores units), and the global attributes
  ``Conventions`` (CF-1.10), ``title``, ``units_note``, ``format``, ``format_version``,
  ``box``, ``time`` and any others the caller gives (e.g. the case parameters).

Files written by ``vortexsim.validation.spectral_ns`` before this module existed are the same
format (without ``Conventions``) and read the same.  Units are the flow's: L (length),
T (time).
"""
from __future__ import annotations

import logging
import math
import numbers
import os

import numpy as np

from ..backend import to_host
from .cf import variable_attrs
from .files import atomic_path

logger = logging.getLogger(__name__)

__all__ = ["FIELD_FORMAT", "FIELD_FORMAT_VERSION", "lattice", "write_velocity_field",
           "read_velocity_field"]

#: the file's format name and version (global attributes ``format``, ``format_version``)
FIELD_FORMAT = "periodic-velocity-field"
FIELD_FORMAT_VERSION = 1
#: global attributes that :func:`write_velocity_field` sets itself
_RESERVED = ("Conventions", "format", "format_version", "box", "time", "units_note")
UNITS_NOTE = ("numbers in the flow's units L (length) and T (time): each variable's units "
              "is '1' and case_units its dimension in L and T")


def lattice(n, box=2 * math.pi):
    """The lattice coordinates x_i = i L/n, i = 0..n−1 (host float64) [L]."""
    return np.arange(n) * (box / n)


def _attr_value(key, value):
    """``value`` as a netCDF attribute (None → "none", bool → int, NumPy scalars → Python)."""
    if value is None:
        return "none"
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (str, numbers.Real)):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        return np.asarray(value)
    raise TypeError(f"attribute {key!r} is a {type(value).__name__}; expected a string, a "
                    "number or a list of numbers (a netCDF attribute).")


def write_velocity_field(path, u, box, t=0.0, overwrite=False, title=None, attrs=None):
    """Write the lattice velocity ``u`` to ``path`` (format of the module docstring).

    Parameters
    ----------
    path : str or path-like, the netCDF file; written atomically
        (:func:`vortexsim.output.files.atomic_path`: a reader sees no partial file)
    u : array (3, n, n, n) [L/T], [component, x, y, z], NumPy or CuPy (copied to the host)
    box : float, the period L > 0 [L]
    t : float, the field's time [T] (attribute ``time``)
    overwrite : bool, replace an existing ``path`` (else FileExistsError)
    title : str or None, the ``title`` attribute (default: says the lattice and box)
    attrs : dict or None, more global attributes (e.g. the case parameters); they may not
        replace the format's own (``box``, ``time``, ``format``, ...)

    Returns
    -------
    ``path``
    """
    import xarray as xr  # noqa: PLC0415

    u = to_host(u)
    if u.ndim != 4 or u.shape[0] != 3 or len(set(u.shape[1:])) != 1:
        raise ValueError(f"u has shape {u.shape}; expected (3, n, n, n) ([component, x, y, z];"
                         " transpose a (n, n, n, 3) field with numpy.moveaxis(u, -1, 0)).")
    if u.dtype.kind not in "fiu":
        raise TypeError(f"u has dtype {u.dtype}; expected a real float64 velocity.")
    if not np.isfinite(u).all():
        raise ValueError("u has non-finite values; give a finite velocity field.")
    if isinstance(box, bool) or not isinstance(box, numbers.Real) or not (
            math.isfinite(box) and box > 0):
        raise ValueError(f"box is {box!r}; expected a finite period L > 0.")
    if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t):
        raise ValueError(f"t is {t!r}; expected a finite time.")
    attrs = dict(attrs or {})
    clash = sorted(set(attrs) & set(_RESERVED))
    if clash:
        raise ValueError(f"attrs {clash} are set by the file format itself; pass box and t "
                         "as arguments and leave the others out.")
    extra = {str(k): _attr_value(k, v) for k, v in attrs.items()}
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True (--overwrite) to replace it.")
    n = u.shape[1]
    box = float(box)
    x = lattice(n, box)
    # no CF ``axis`` X/Y/Z: CF (and the compliance checker) read X and Y as horizontal
    # earth coordinates that need latitude/longitude and Z as a vertical one that needs
    # ``positive``; the periodic box is neither
    coords = {d: (d, x, variable_attrs("L", f"{d} of the lattice point, i L/n"))
              for d in ("x", "y", "z")}
    ds = xr.Dataset(
        {name: (("x", "y", "z"), np.ascontiguousarray(u[c], dtype=np.float64),
                variable_attrs("L/T", f"velocity component {c + 1} ({d})"))
         for c, (name, d) in enumerate(zip("uvw", "xyz"))},
        coords=coords)
    ds.attrs.update({
        "Conventions": "CF-1.10",
        "title": title or f"velocity on the {n}^3 lattice of the box [0, {box:g})^3",
        "units_note": UNITS_NOTE,
        "format": FIELD_FORMAT,
        "format_version": FIELD_FORMAT_VERSION,
        "box": box,
        "time": float(t),
        **extra,
    })
    encoding = {v: {"_FillValue": None} for v in list(ds.data_vars) + list(ds.coords)}
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp, engine="netcdf4", format="NETCDF4", encoding=encoding)
    logger.debug("wrote %s (%d^3 velocity field, t = %g)", path, n, t)
    return path


def _float_attr(path, ds, name):
    """The global attribute ``name`` of ``ds`` as a finite float, or a one-line error."""
    value = ds.attrs[name]
    try:
        value = float(np.asarray(value).item())
    except (TypeError, ValueError):
        raise ValueError(f"{path}: attribute {name} is {value!r}; expected a number.") from None
    if not math.isfinite(value):
        raise ValueError(f"{path}: attribute {name} is {value!r}; expected a finite number.")
    return value


def read_velocity_field(path, box=None):
    """Read a velocity field in the format of the module docstring.

    Returns ``(u, box, t, attrs)``: u (3, n, n, n) host float64 [component, x, y, z]
    [L/T], the period L (the file's ``box`` attribute, else n × the x spacing, else the
    ``box`` argument; a ``box`` argument that disagrees with the file's is an error), the
    ``time`` attribute (0 if absent) and the global attributes (a dict).  Every problem
    (missing file, not netCDF, no velocity, wrong dims, a lattice that is not i L/n,
    non-finite values) is a one-line FileNotFoundError or ValueError.
    """
    import xarray as xr  # noqa: PLC0415

    if not os.path.isfile(path):
        raise FileNotFoundError(f"velocity field {path} does not exist (or is no file).")
    try:
        with xr.open_dataset(path, engine="netcdf4") as ds:
            ds = ds.load()
    except (OSError, ValueError, RuntimeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"{path} is not a readable netCDF file ({first}).") from None
    if all(v in ds.data_vars for v in "uvw"):
        parts = []
        for v in "uvw":
            if set(ds[v].dims) != {"x", "y", "z"}:
                raise ValueError(f"{path}: variable {v} has dims {ds[v].dims}; expected "
                                 "(x, y, z).")
            parts.append(ds[v].transpose("x", "y", "z").values)
        u = np.stack(parts)
    elif "velocity" in ds.data_vars:
        var = ds["velocity"]
        if set(var.dims) != {"component", "x", "y", "z"} or var.sizes["component"] != 3:
            raise ValueError(f"{path}: variable velocity has dims {dict(var.sizes)}; expected "
                             "(component: 3, x, y, z).")
        u = var.transpose("component", "x", "y", "z").values
    else:
        raise ValueError(f"{path} has variables {sorted(ds.data_vars)}; expected u, v, w "
                         "(dims x, y, z) or velocity (dims component, x, y, z).")
    if u.dtype.kind not in "fiu":
        raise ValueError(f"{path}: the velocity has dtype {u.dtype}; expected float64.")
    u = np.ascontiguousarray(u, dtype=np.float64)
    n = u.shape[1]
    if u.shape[1:] != (n, n, n):
        raise ValueError(f"{path}: the lattice is {u.shape[1:]}; expected n³ (n the same on "
                         "all three axes).")
    if not np.isfinite(u).all():
        raise ValueError(f"{path}: the velocity has non-finite values.")
    if "box" in ds.attrs:
        file_box = _float_attr(path, ds, "box")
        if not file_box > 0:
            raise ValueError(f"{path}: attribute box is {file_box!r}; expected a period > 0.")
        if box is not None and not math.isclose(box, file_box, rel_tol=1e-12):
            raise ValueError(f"{path} has box = {file_box!r}; asked for {box!r}. Leave "
                             "--box out to use the file's.")
        box = file_box
    elif "x" in ds.coords and n > 1:
        box = n * float(ds["x"].values[1] - ds["x"].values[0])
    elif box is None:
        raise ValueError(f"{path} has no box attribute and no x coordinate; give --box.")
    for d in ("x", "y", "z"):
        if d in ds.coords and not np.allclose(ds[d].values, lattice(n, box), rtol=0,
                                              atol=1e-9 * box / n):
            raise ValueError(f"{path}: coordinate {d} is not the lattice i L/n (L = {box:g}, "
                             f"n = {n}); the solver's lattice starts at 0 with spacing L/n.")
    t = _float_attr(path, ds, "time") if "time" in ds.attrs else 0.0
    return u, float(box), t, dict(ds.attrs)
