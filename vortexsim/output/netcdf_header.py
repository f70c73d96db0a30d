"""What a netCDF file declares, read before any of its values: the checks that every
command runs on a file it opens (snapshots, diagnostics, spectra).

A file is input like any other.  It may be no regular file at all (a pipe or a device
named like a snapshot would block or never end), and its header may declare variables
far larger than the file stores (an unwritten chunked variable of 10⁹ values takes a few
bytes on disk but gigabytes once read).  :func:`read_header` reads only the header
(names, dimensions, shapes, dtypes; no values), :func:`check_declared_sizes` refuses a
variable whose values cannot be in the file, and :func:`load_variables` reads the named
variables only, so that a variable a command does not need is never read.

vortexsim writes its arrays uncompressed, so every variable of its files takes at most the
file's own size; a compressed copy (e.g. ``nccopy -d``) shrinks numbers a few times at
most.  :data:`MAX_DECLARED_RATIO` times the file's size plus :data:`DECLARED_SLACK` is
the most that one variable may declare.
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np

from .validate import printable

__all__ = ["SnapshotError", "NetcdfHeader", "check_regular_file", "read_header",
           "check_declared_sizes", "load_variables", "MAX_DECLARED_RATIO", "DECLARED_SLACK"]

#: the most bytes one variable may declare, as a multiple of the file's size (plus
#: :data:`DECLARED_SLACK`): room for a compressed copy of a vortexsim file
MAX_DECLARED_RATIO = 8
#: bytes [B] any variable may declare beyond ``MAX_DECLARED_RATIO`` times the file's size
DECLARED_SLACK = 2**20
#: bytes per value [B] counted for variable-length values (strings): their pointers
_VLEN_BYTES = 16


class SnapshotError(ValueError):
    """A file that cannot be restarted from (missing, truncated, corrupted or foreign)."""


@dataclasses.dataclass(frozen=True)
class NetcdfHeader:
    """The header of a netCDF file (:func:`read_header`).

    path : str
    size : int [B], the file's size on disk
    dims : dict name -> length
    variables : dict name -> (dims tuple, shape tuple, bytes per value)
    attrs : dict, the global attributes as netCDF4 gives them
    variable_attrs : dict name -> dict, each variable's attributes
    """

    path: str
    size: int
    dims: dict
    variables: dict
    attrs: dict
    variable_attrs: dict

    def declared_bytes(self, name):
        """Bytes [B] that the values of the variable ``name`` take once read."""
        _, shape, itemsize = self.variables[name]
        return int(np.prod(shape, dtype=np.float64)) * itemsize


def check_regular_file(path):
    """``SnapshotError`` (one line) unless ``path`` is an existing regular file: a pipe or a
    device would block the reader or never end."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SnapshotError(f"{path} does not exist.")
    if os.path.isdir(path):
        raise SnapshotError(f"{path} is a directory; give a netCDF file of a run (e.g. a "
                            "snapshot_*.nc).")
    if not os.path.isfile(path):
        raise SnapshotError(f"{path} is not a regular file (a pipe, device or socket, which "
                            "vortexsim never reads); give a netCDF file of a run (e.g. a "
                            "snapshot_*.nc).")
    return path


def _read_error(path, exc):
    first = printable(str(exc).splitlines()[0] if str(exc) else "")
    size = os.path.getsize(path)
    return SnapshotError(f"cannot read {path} ({size} bytes) as netCDF: the file is "
                         f"truncated, corrupted or not netCDF ({type(exc).__name__}: {first}).")


def read_header(path):
    """The :class:`NetcdfHeader` of the regular file ``path``, read with netCDF4 without
    reading any values; ``SnapshotError`` (one line) for a file that is missing, not a
    regular file, or not readable as netCDF."""
    import netCDF4  # noqa: PLC0415

    path = check_regular_file(path)
    try:
        with netCDF4.Dataset(path, "r") as nc:
            dims = {name: len(d) for name, d in nc.dimensions.items()}
            variables, variable_attrs = {}, {}
            for name, var in nc.variables.items():
                dtype = var.dtype
                itemsize = dtype.itemsize if isinstance(dtype, np.dtype) else _VLEN_BYTES
                variables[name] = (tuple(var.dimensions), tuple(int(n) for n in var.shape),
                                   max(int(itemsize), 1))
                variable_attrs[name] = {a: var.getncattr(a) for a in var.ncattrs()}
            attrs = {a: nc.getncattr(a) for a in nc.ncattrs()}
    except Exception as exc:  # noqa: BLE001 - any reader error means the same to the user
        raise _read_error(path, exc) from None
    return NetcdfHeader(path, os.path.getsize(path), dims, variables, attrs, variable_attrs)


def check_declared_sizes(header, expected_dims=None):
    """``SnapshotError`` (one line) for a variable of ``header`` that declares more bytes
    than the file can hold (:data:`MAX_DECLARED_RATIO`), or a dimension whose length
    disagrees with ``expected_dims`` (name -> (length, what of the file says so): the counts
    the file itself records, e.g. a snapshot's element and tracer counts)."""
    for name, (want, source) in (expected_dims or {}).items():
        have = header.dims.get(name)
        if have is not None and have != want:
            raise SnapshotError(
                f"{header.path}: dimension {printable(name)} has length {have}, but the "
                f"file's {source} is {want}; the file is corrupted or was not written by "
                "vortexsim.")
    limit = MAX_DECLARED_RATIO * header.size + DECLARED_SLACK
    for name in header.variables:
        need = header.declared_bytes(name)
        if need > limit:
            shape = " x ".join(str(n) for n in header.variables[name][1])
            raise SnapshotError(
                f"{header.path}: variable {printable(name)} declares {shape} values "
                f"({need / 2**20:.4g} MiB) in a file of {header.size / 2**20:.4g} MiB, more "
                "than the file can hold; the file is corrupted or was not written by "
                "vortexsim.")


def load_variables(header, names=None):
    """An xarray Dataset of the file of ``header`` (engine netcdf4, no decoding) with the
    variables ``names`` (those present; None: all) loaded into memory, its global
    attributes, and no other variable read; ``SnapshotError`` when the file cannot be
    read."""
    import xarray as xr  # noqa: PLC0415

    drop = [] if names is None else [v for v in header.variables if v not in set(names)]
    try:
        with xr.open_dataset(header.path, engine="netcdf4", decode_times=False,
                             decode_cf=False, mask_and_scale=False,
                             drop_variables=drop) as ds:
            return ds.load()
    except Exception as exc:  # noqa: BLE001 - any reader error means the same to the user
        raise _read_error(header.path, exc) from None
