"""Open a vortexsim run directory with xarray: snapshots, diagnostics, spectra.

The diagnostics and spectra come through vortexsim's readers
(:func:`vortexsim.output.diagnostics.read_rows`, with its checks); the snapshots are
listed by :func:`vortexsim.output.writers.snapshot_files`, their headers read with netCDF4
and their element and tracer arrays read lazily, one snapshot at a time, when their
values are used (the readers of :mod:`vortexsim.output.snapshot` load and verify whole
files, checksums included, which a restart needs and a plot of many snapshots does not)::

    from postprocess import open_run, open_diagnostics, open_spectra
    run = open_run("runs/leapfrog")            # every snapshot along the time t
    run.element_x.isel(t=-1).values             # reads one snapshot's positions
    diag = open_diagnostics("runs/leapfrog")    # ring_centre (t, ring, component) ...

The time coordinate is ``t`` (``time`` in files of format 3 and older, renamed on
reading: :mod:`vortexsim.output.cf`); every variable's ``units`` is "1" and its
dimension in the case's units is ``case_units``.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["RUN_MARKER", "check_run_dir", "open_run", "open_diagnostics", "open_spectra"]

#: the marker file that ``vortexsim run`` writes into its directory (vortexsim.cli.RUN_MARKER)
RUN_MARKER = ".vortexsim-run"
DIAGNOSTICS_FILE = "diagnostics.nc"


def _snapshot_files(run_dir):
    from vortexsim.output.writers import snapshot_files  # noqa: PLC0415
    return [path for _, path in sorted(snapshot_files(run_dir).items())]


def check_run_dir(run_dir):
    """``run_dir`` as a str when it is a vortexsim run directory (its marker
    ``.vortexsim-run``, ``diagnostics.nc`` or a ``snapshot_*.nc``); else ``ValueError``
    with a one-line message."""
    run_dir = os.fspath(run_dir)
    if not os.path.isdir(run_dir):
        what = "does not exist" if not os.path.lexists(run_dir) else "is not a directory"
        raise ValueError(f"{run_dir} {what}; give a run directory of vortexsim "
                         "(the --out of vortexsim run).")
    if not (os.path.isfile(os.path.join(run_dir, RUN_MARKER))
            or os.path.isfile(os.path.join(run_dir, DIAGNOSTICS_FILE))
            or _snapshot_files(run_dir)):
        raise ValueError(f"{run_dir} is not a vortexsim run directory (no {RUN_MARKER}, "
                         f"{DIAGNOSTICS_FILE} or snapshot_*.nc).")
    return run_dir


def _read_error(exc):
    """The one-line ValueError of a reader's SnapshotError (itself a ValueError)."""
    return ValueError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def _stacked_variable(paths, name, shapes, dtype):
    """A :class:`_StackedVariable` (defined on first use: xarray is imported lazily)."""
    global _StackedVariable  # noqa: PLW0603
    if _StackedVariable is None:
        from xarray.backends import BackendArray  # noqa: PLC0415
        _StackedVariable = type("_StackedVariable", (_Stacked, BackendArray), {})
    return _StackedVariable(paths, name, shapes, dtype)


_StackedVariable = None


class _Stacked:
    """A variable of every snapshot along ``t``, read from the files on indexing
    (an xarray ``BackendArray``: only the snapshots and the slice asked for are read).

    Snapshots of different sizes (remeshing in free space changes the element count)
    are padded to the largest: NaN for floats, -1 for integers."""

    def __init__(self, paths, name, shapes, dtype):
        self.paths, self.name = list(paths), name
        self.shapes = shapes                     # per file, without the time axis
        tail = tuple(max(s[i] for s in shapes) for i in range(len(shapes[0])))
        self.shape = (len(self.paths), *tail)
        self.dtype = np.dtype(dtype)
        self.fill = np.nan if self.dtype.kind == "f" else -1

    def __getitem__(self, key):
        from xarray.core import indexing  # noqa: PLC0415
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.BASIC, self._read)

    def _read(self, key):
        import netCDF4  # noqa: PLC0415

        first, rest = key[0], tuple(key[1:])
        files = range(len(self.paths))[first] if isinstance(first, slice) else [first]
        out = []
        for i in files:
            with netCDF4.Dataset(self.paths[i]) as nc:
                var = nc.variables[self.name]
                var.set_auto_maskandscale(False)
                if tuple(self.shapes[i]) == self.shape[1:]:
                    out.append(np.asarray(var[(0, *rest)]))
                    continue
                full = np.full(self.shape[1:], self.fill, dtype=self.dtype)
                full[tuple(slice(0, n) for n in self.shapes[i])] = var[0]
                out.append(full[rest])
        if not isinstance(first, slice):
            return out[0]
        if not out:
            return np.empty((0, *np.empty(self.shape[1:])[rest].shape), self.dtype)
        return np.stack(out)


def open_run(run_dir):
    """Every snapshot of ``run_dir`` as one xarray Dataset along ``t`` (oldest first).

    Lazy without dask: the coordinate ``t`` and the small per-snapshot variables
    (``iteration``, ``dt_next``, ``sigma_range``, ``fmm_depth``, ``speed_last``) are
    loaded; the element and tracer arrays (``element_x``, ``element_alpha``,
    ``element_sigma``, ``element_volume``, ``element_group``, ``tracer_x``) are read from
    the files only when their values are used (``.values``, ``.load()``), only for the
    snapshots indexed.  Snapshots with fewer elements or tracers than the largest are
    padded (NaN; -1 for ``element_group``); ``n_element`` and ``n_tracer`` (t) give
    each snapshot's own counts.  Variable attributes (``units``, ``long_name``) are
    those of the files; the global attributes are the newest snapshot's, plus
    ``snapshot_files`` (the file names, in order).

    Raises ValueError (one line) for a directory that is not a run or has no snapshot,
    and for a snapshot that vortexsim's reader refuses (not a vortexsim snapshot,
    truncated, corrupted).
    """
    import netCDF4  # noqa: PLC0415
    import xarray as xr  # noqa: PLC0415
    from xarray.core import indexing  # noqa: PLC0415

    from vortexsim.output.cf import OLD_TIME, TIME, with_current_names  # noqa: PLC0415
    from vortexsim.output.snapshot import SnapshotError, open_netcdf  # noqa: PLC0415

    def current(name):                  # the time's name in files of format 3 and older
        return TIME if name == OLD_TIME else name

    run_dir = check_run_dir(run_dir)
    paths = _snapshot_files(run_dir)
    if not paths:
        raise ValueError(f"{run_dir} has no snapshot_*.nc files.")
    heads = []                      # per file: {name: (dims, shape, dtype, attrs)}, attrs
    for path in paths:
        try:
            with netCDF4.Dataset(path) as nc:
                if getattr(nc, "vortexsim_format", None) != "vortexsim snapshot":
                    raise SnapshotError(f"{path} is not a vortexsim snapshot.")
                heads.append(({current(n): (tuple(current(d) for d in v.dimensions),
                                            v.shape, v.dtype,
                                            {a: v.getncattr(a) for a in v.ncattrs()})
                               for n, v in nc.variables.items()},
                              {a: nc.getncattr(a) for a in nc.ncattrs()}))
        except SnapshotError as exc:
            raise _read_error(exc) from None
        except OSError as exc:
            raise ValueError(f"cannot read {path} as netCDF: {exc}") from None
    small, large = {}, {}
    for name, (dims, _, dtype, attrs) in heads[-1][0].items():
        if name == TIME or dims[:1] != (TIME,):
            continue
        if not all(name in h[0] and h[0][name][0] == dims for h in heads):
            continue                                 # not in every snapshot (older format)
        if len(dims) <= 2 and not any(d in ("element", "tracer") for d in dims):
            small[name] = (dims, attrs)
        else:
            large[name] = (dims, dtype, attrs)
    times, loaded = [], {name: [] for name in small}
    for path in paths:             # the small variables through vortexsim's reader
        try:
            ds = with_current_names(open_netcdf(path, [TIME, OLD_TIME, *small]))
        except SnapshotError as exc:
            raise _read_error(exc) from None
        times.append(float(ds[TIME].values[0]))
        for name in small:
            loaded[name].append(ds[name].values[0])
    data = {name: (dims, np.stack(loaded[name]), attrs)
            for name, (dims, attrs) in small.items()}
    for name, (dims, dtype, attrs) in large.items():
        shapes = [h[0][name][1][1:] for h in heads]
        lazy = indexing.LazilyIndexedArray(_stacked_variable(paths, name, shapes, dtype))
        data[name] = xr.Variable(dims, lazy, attrs)
    for dim in ("element", "tracer"):
        var = next((n for n in large if dim in large[n][0]), None)
        if var is not None:
            axis = large[var][0].index(dim)
            counts = np.array([h[0][var][1][axis] for h in heads], dtype=np.int64)
            data[f"n_{dim}"] = (TIME, counts, {"units": "1", "long_name": f"number of "
                                               f"{dim}s in the snapshot"})
    time_attrs = heads[-1][0][TIME][3] if TIME in heads[-1][0] else {}
    ds = xr.Dataset(data, coords={TIME: (TIME, np.array(times), time_attrs)})
    ds.attrs.update(heads[-1][1])
    ds.attrs["snapshot_files"] = " ".join(os.path.basename(p) for p in paths)
    return ds


def _rows(run_dir):
    """The rows of ``run_dir/diagnostics.nc`` (None without the file)."""
    from vortexsim.output.diagnostics import read_rows  # noqa: PLC0415
    from vortexsim.output.snapshot import SnapshotError  # noqa: PLC0415

    path = os.path.join(check_run_dir(run_dir), DIAGNOSTICS_FILE)
    if not os.path.exists(path):
        return None
    try:
        return read_rows(path)
    except SnapshotError as exc:
        raise _read_error(exc) from None


def open_diagnostics(run_dir):
    """``diagnostics.nc`` of ``run_dir`` as an xarray Dataset (loaded: it is small), or
    None when the run has none.  Dims ``t``, ``component`` and, for ring cases,
    ``ring`` (coordinate: the ring names); every quantity of
    :data:`vortexsim.output.diagnostics.QUANTITIES` that the run wrote, with its
    ``units``, ``case_units`` and ``long_name`` (e.g. ``ring_centre`` (t, ring, component),
    case_units L).
    Read through :func:`vortexsim.output.diagnostics.read_rows` (so its checks apply;
    a refused file raises ValueError) and laid out by the writer's own
    :func:`vortexsim.output.diagnostics.rows_dataset`; the file's global attributes."""
    from vortexsim.output.diagnostics import rows_dataset  # noqa: PLC0415

    rows = _rows(run_dir)
    if rows is None:
        return None
    ds = rows_dataset(rows, {}, "")
    ds.attrs = {**_global_attrs(os.path.join(run_dir, DIAGNOSTICS_FILE)),
                "run_dir": os.fspath(run_dir)}
    return ds


def _global_attrs(path):
    """The global attributes of a netCDF file that vortexsim's reader accepted."""
    import netCDF4  # noqa: PLC0415
    with netCDF4.Dataset(path) as nc:
        return {a: nc.getncattr(a) for a in nc.ncattrs()}


def open_spectra(run_dir):
    """The energy spectra of ``run_dir`` (``spectra.nc``, periodic runs with remeshing)
    as an xarray Dataset: ``energy_spectrum`` (t, wavenumber) [L^3/T^2] and
    ``iteration`` (t), coordinates ``t`` [T] and ``wavenumber`` [1/L] (case units);
    loaded.
    None when the run has no spectra.  Read with the diagnostics rows
    (:func:`vortexsim.output.diagnostics.read_rows`), which checks that they match, and
    laid out by the writer's :func:`vortexsim.output.diagnostics.spectra_dataset`."""
    from vortexsim.output.diagnostics import spectra_dataset  # noqa: PLC0415

    rows = _rows(run_dir)
    if not rows or "energy_spectrum" not in rows[0]:
        return None
    ds = spectra_dataset(rows, {}, "")
    ds.attrs = {"run_dir": os.fspath(run_dir)}
    return ds
