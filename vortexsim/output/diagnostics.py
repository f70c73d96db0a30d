r"""The diagnostics file of a run: one row per diagnostic time, ``diagnostics.nc``.

Layout (xarray, engine netcdf4)::

    dimensions: t (rows), component (3), ring (R)
    t (t) [T], iteration (t) [1], dt_next (t) [T]
    total_vorticity, linear_impulse, angular_impulse (t, component)
                                    [L^3/T], [L^4/T], [L^5/T]
    energy, helicity, enstrophy (t)            [L^5/T^2], [L^4/T^2], [L^3/T^2]
    mean_energy, dissipation (t; periodic box) [L^2/T^2], [L^2/T^3]
    particle_energy, particle_dissipation (t; periodic box) [L^2/T^2], [L^2/T^3]
    ring (ring): ring names; ring_centre, ring_axis (t, ring, component) [L], [1];
    ring_radius (t, ring) [L]
    lattice_energy, lattice_dissipation, lattice_enstrophy, u_rms, integral_scale,
    taylor_scale, re_lambda, kolmogorov_eta, k_max_eta, skewness, flatness (t;
    periodic box with remeshing: the turbulence statistics of the lattice's vorticity)

and beside it, in a periodic box with remeshing, ``spectra.nc`` (format
"vortexsim spectra"): energy_spectrum (t, wavenumber) [L^3/T^2], iteration (t),
coordinate wavenumber [1/L].  The brackets are the ``case_units`` of the variables,
whose ``units`` are "1" and whose ``long_name`` ends with them (", in L^5/T^2", which
xarray's plot labels show; :mod:`.cf`); files of format 3 and older call ``t`` ``time``
and read the same.  It is rewritten before ``diagnostics.nc`` with the same rows
(so it always holds every row that the diagnostics file names) and read back with it.

The quantities are those of :meth:`vortexsim.Simulation.diagnostics` (``physics.md``).
The whole file is rewritten atomically with every row so far (it is small), so it always
holds every row up to the last one written; during a run the rewrite runs on the output
thread (:mod:`vortexsim.simulation.output_thread`), from the rows captured when the row was added,
and at most every ``MIN_REWRITE_INTERVAL`` seconds (2 s) of wall time, but always before
a snapshot and at the end of the run (:class:`vortexsim.output.writers.DiagnosticsWriter`).
A restart continues the file after the snapshot's rows without duplicated or missing rows;
``vortexsim restart`` does so in place only when no later row would be lost, and
otherwise writes a branch whose file starts with a copy of the rows up to the snapshot
(:func:`split_rows`, :mod:`vortexsim.output.writers`).
"""
from __future__ import annotations

import logging
import os

import numpy as np

from .files import atomic_path
from .cf import (OLD_TIME, RING_NAME, TIME, time_attrs, unit_attrs, variable_attrs,
                 with_current_names)
from .snapshot import FORMAT_VERSION, SnapshotError, open_netcdf
from .validate import InvalidValue, array

logger = logging.getLogger(__name__)

__all__ = ["DIAGNOSTICS_FORMAT", "DiagnosticsLog", "read_rows", "split_rows", "QUANTITIES",
           "SPECTRA_FILE", "rows_dataset", "spectra_dataset"]

DIAGNOSTICS_FORMAT = "vortexsim diagnostics"

#: name: (per-row shape kind, units, long_name)
QUANTITIES = {
    "iteration": ("scalar", "1", "number of completed time steps"),
    "dt_next": ("scalar", "T", "time step of the next step"),
    "total_vorticity": ("vector", "L^3/T", "total vorticity, sum of alpha"),
    "linear_impulse": ("vector", "L^4/T", "linear impulse P = 1/2 sum x cross alpha"),
    "angular_impulse": ("vector", "L^5/T",
                        "angular impulse A = 1/3 sum x cross (x cross alpha)"),
    "energy": ("scalar", "L^5/T^2", "kinetic energy (per unit density)"),
    "helicity": ("scalar", "L^4/T^2", "helicity sum u(x_p) . alpha_p"),
    "enstrophy": ("scalar", "L^3/T^2", "enstrophy (per unit volume integral)"),
    "mean_energy": ("scalar", "L^2/T^2", "box average of the kinetic energy 1/2 <|u|^2> "
                    "(periodic box)"),
    "dissipation": ("scalar", "L^2/T^3", "dissipation rate nu <|omega|^2> (periodic box)"),
    "particle_energy": ("scalar", "L^2/T^2", "box average 1/2 <omega_p . psi> of the particle "
                        "vorticity and the blob stream function: the energy the method keeps "
                        "(periodic box)"),
    "particle_dissipation": ("scalar", "L^2/T^3", "viscous loss nu <omega_p . omega> of "
                             "particle_energy (periodic box)"),
    "lattice_energy": ("scalar", "L^2/T^2", "box average 1/2 <|u|^2> of the velocity of "
                       "the remeshing lattice's vorticity (periodic box)"),
    "lattice_dissipation": ("scalar", "L^2/T^3", "dissipation rate 2 nu <s_ij s_ij> of "
                            "lattice_energy's velocity (periodic box)"),
    "lattice_enstrophy": ("scalar", "1/T^2", "box average <|omega|^2> of the remeshing "
                          "lattice's vorticity (periodic box)"),
    "u_rms": ("scalar", "L/T", "rms velocity u' = sqrt(2 lattice_energy / 3)"),
    "integral_scale": ("scalar", "L", "integral scale pi / (2 u'^2) int E(k)/k dk"),
    "taylor_scale": ("scalar", "L", "Taylor micro-scale sqrt(15 nu u'^2 / epsilon)"),
    "re_lambda": ("scalar", "1", "Taylor-scale Reynolds number u' lambda / nu"),
    "kolmogorov_eta": ("scalar", "L", "Kolmogorov scale (nu^3 / epsilon)^(1/4)"),
    "k_max_eta": ("scalar", "1", "k_max eta, k_max = n/3 2 pi/L (the 2/3 rule)"),
    "skewness": ("scalar", "1", "longitudinal velocity-derivative skewness, mean over x, y, z"),
    "flatness": ("scalar", "1", "longitudinal velocity-derivative flatness, mean over x, y, z"),
    "ring_centre": ("ring_vector", "L", "ring centre from the impulse"),
    "ring_radius": ("ring_scalar", "L", "ring radius sqrt(|P . n| / (pi |Gamma|))"),
    "ring_axis": ("ring_vector", "1", "ring axis n = sign(Gamma) P / |P|"),
    "energy_error": ("scalar", "1", "numerical health: energy off its balance, (E - E_ref) / "
                     "E(0) with E_ref = E(0) - integral of nu enstrophy dt"),
    "spacing_max": ("scalar", "1", "numerical health: largest element spacing along the "
                    "vortex lines over sigma (reported up to 3)"),
    "ring_escaped": ("ring_scalar", "1", "numerical health: fraction of the ring's |alpha| "
                     "farther than R/2 from its core circle"),
    "step_strain": ("scalar", "1", "numerical health: dt max |grad u| of the last step"),
}
#: the file beside ``diagnostics.nc`` that holds the rows' energy spectra
SPECTRA_FILE = "spectra.nc"
SPECTRA_FORMAT = "vortexsim spectra"
_DIMS = {"scalar": (TIME,), "vector": (TIME, "component"),
         "ring_scalar": (TIME, "ring"), "ring_vector": (TIME, "ring", "component")}


def _time_coordinate(rows):
    """The time coordinate of a file of ``rows`` (the rows' ``t``)."""
    return (TIME, np.array([r["t"] for r in rows], dtype=np.float64),
            time_attrs())


def _file_attrs(title, file_format, meta, history):
    """The global attributes that the diagnostics and the spectra files share."""
    return {"Conventions": "CF-1.10", "title": f"{title} of case {meta.get('case')}",
            "history": history, "source": f"vortexsim {meta.get('vortexsim_version', '')}",
            **unit_attrs(meta), "vortexsim_format": file_format,
            "vortexsim_format_version": FORMAT_VERSION}


def rows_dataset(rows, meta, history):
    """The rows (dicts of :meth:`vortexsim.Simulation.diagnostics`) as the xarray Dataset
    of ``diagnostics.nc`` (the layout of the module docstring; ``meta``: global
    attributes, ``history``: the CF history text)."""
    import xarray as xr  # noqa: PLC0415

    data = {}
    for name, (kind, units, long) in QUANTITIES.items():
        if not rows or name not in rows[0]:
            continue
        values = np.stack([np.asarray(r[name]) for r in rows])
        if name == "iteration":
            values = values.astype(np.int64)
        data[name] = (_DIMS[kind], values, variable_attrs(units, long))
    coords = {TIME: _time_coordinate(rows)}
    if rows and "ring_names" in rows[0]:
        coords["ring"] = ("ring", np.array(list(rows[0]["ring_names"]), dtype=object),
                          variable_attrs("1", "ring name"))
    ds = xr.Dataset(data, coords=coords)
    if rows and "energy_spectrum" in rows[0]:
        ds.attrs["spectra_file"] = SPECTRA_FILE
    ds.attrs.update({
        **_file_attrs("vortexsim diagnostics", DIAGNOSTICS_FORMAT, meta, history),
        **{k: ("none" if v is None else v) for k, v in meta.items() if k != "config_json"},
    })
    return ds


def spectra_dataset(rows, meta, history):
    """The energy spectra of ``rows`` (each with ``wavenumber`` and ``energy_spectrum``,
    :meth:`vortexsim.Simulation.diagnostics`) as the dataset of ``spectra.nc``: dims
    t × wavenumber, ``energy_spectrum`` [L^3/T^2] and ``iteration`` per row."""
    import xarray as xr  # noqa: PLC0415

    k = np.asarray(rows[0]["wavenumber"], dtype=np.float64)
    spectra = np.stack([np.asarray(r["energy_spectrum"], dtype=np.float64) for r in rows])
    if spectra.shape[1] != k.size:
        raise ValueError(f"energy spectra of {spectra.shape[1]} shells but {k.size} "
                         "wavenumbers")
    ds = xr.Dataset(
        {"energy_spectrum": ((TIME, "wavenumber"), spectra, variable_attrs(
            "L^3/T^2", "shell-summed energy spectrum E(k) of the remeshing lattice's "
            "velocity, sum E(k) dk = lattice_energy")),
         "iteration": (TIME, np.array([r["iteration"] for r in rows], dtype=np.int64),
                       variable_attrs("1", "number of completed time steps"))},
        coords={TIME: _time_coordinate(rows),
                "wavenumber": ("wavenumber", k, variable_attrs(
                    "1/L", "shell centre |k| = s 2 pi/L, shell s - 1/2 <= |k| L/(2 pi) "
                    "< s + 1/2, width dk = 2 pi/L"))})
    ds.attrs.update({**_file_attrs("vortexsim energy spectra", SPECTRA_FORMAT, meta, history),
                     "diagnostics_file": "diagnostics.nc"})
    return ds


def _beside(path, name):
    """The file ``name`` in the directory of the file ``path``."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), name)


def _read_spectra(path, rows):
    """Attach ``wavenumber`` and ``energy_spectrum`` from the spectra file ``path`` to
    each of ``rows`` (by iteration); SnapshotError when the file is missing, not a
    vortexsim spectra file or lacks a row's iteration."""
    if not os.path.exists(path):
        raise SnapshotError(f"{path} is missing but the diagnostics file beside it names "
                            "it; restore it (or copy the whole run directory).")
    ds = with_current_names(open_netcdf(path, [TIME, OLD_TIME, "iteration", "wavenumber",
                                               "energy_spectrum"]))
    if ds.attrs.get("vortexsim_format") != SPECTRA_FORMAT:
        raise SnapshotError(f"{path} is not a vortexsim spectra file.")
    try:
        if "energy_spectrum" not in ds.variables or "iteration" not in ds.variables:
            raise InvalidValue("the variable energy_spectrum or iteration is missing")
        n = ds.sizes.get(TIME, 0)
        k = array("wavenumber", ds["wavenumber"].values, (ds.sizes["wavenumber"],), "f",
                  finite=True)
        e = array("energy_spectrum", ds["energy_spectrum"].values, (n, k.size), "f")
        it = array("iteration", ds["iteration"].values, (n,), "iu", finite=True)
    except (InvalidValue, KeyError) as exc:
        raise SnapshotError(f"{path}: {exc}; the spectra file is corrupted.") from None
    index = {int(i): j for j, i in enumerate(it)}
    for row in rows:
        j = index.get(row["iteration"])
        if j is None:
            raise SnapshotError(f"{path} has no spectrum of iteration {row['iteration']}, a "
                                "row of the diagnostics file beside it; it does not belong "
                                "to this run.")
        row["wavenumber"], row["energy_spectrum"] = k.copy(), np.array(e[j])
    return rows


def _write_netcdf4(ds, path):
    """Write the dataset of :func:`rows_dataset` with netCDF4 itself: the file that
    ``ds.to_netcdf(path, engine="netcdf4", encoding={v: {"_FillValue": None}})`` writes
    (the same dimensions, variables, dtypes and attributes; the ring names as
    variable-length strings), in ~40 % of its time — it runs on the output thread, next to
    the time steps, at most every ``MIN_REWRITE_INTERVAL`` during a run."""
    import netCDF4  # noqa: PLC0415

    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        for dim, size in ds.sizes.items():
            nc.createDimension(dim, size)
        for name, var in ds.variables.items():
            values = var.values
            attrs = dict(var.attrs)
            if values.dtype == object:                      # the ring names
                # CF: a coordinate variable is numeric; the names are an auxiliary
                # coordinate ``ring_name(ring)`` (readers restore the index: cf.py)
                name = RING_NAME
                v = nc.createVariable(name, str, var.dims)
                for i, text in enumerate(values):
                    v[i] = text
            else:
                v = nc.createVariable(name, values.dtype, var.dims, fill_value=False)
                v[...] = values
                if "ring" in var.dims:
                    attrs["coordinates"] = RING_NAME
            v.setncatts(attrs)
        nc.setncatts(ds.attrs)


def read_rows(path):
    """The rows of a diagnostics file (list of dicts, as they were appended).

    Raises :class:`SnapshotError` (one line) for a file that is not a vortexsim
    diagnostics file or whose variables are missing, of the wrong shape or not finite
    where a restart needs them (time, iteration)."""
    # only the variables that rows hold ("time" in formats 1 to 3)
    ds = with_current_names(open_netcdf(path, [TIME, OLD_TIME, "iteration", "ring",
                                               RING_NAME, *QUANTITIES]))
    if ds.attrs.get("vortexsim_format") != DIAGNOSTICS_FORMAT:
        raise SnapshotError(f"{path} is not a vortexsim diagnostics file.")
    n = ds.sizes.get(TIME, 0)
    try:
        for name, kinds in ((TIME, "f"), ("iteration", "iu")):
            if name not in ds.variables:
                raise InvalidValue(f"the variable {name!r} is missing")
            array(name, ds[name].values, (n,), kinds, finite=True)
        for name, (kind, _, _) in QUANTITIES.items():
            if name in ds.variables and ds[name].dims != _DIMS[kind]:
                raise InvalidValue(f"{name} has dimensions {ds[name].dims}, expected "
                                   f"{_DIMS[kind]}")
            if name in ds.variables:
                array(name, ds[name].values, ds[name].shape, "iu" if name == "iteration"
                      else "f")
    except InvalidValue as exc:
        raise SnapshotError(f"{path}: {exc}; the diagnostics file is corrupted.") from None
    rows = []
    names = [str(v) for v in ds["ring"].values] if "ring" in ds.variables else None
    for i in range(n):
        row = {"t": float(ds[TIME].values[i])}
        for name in QUANTITIES:
            if name in ds.variables:
                v = ds[name].values[i]
                row[name] = v.item() if np.ndim(v) == 0 else np.array(v)
        if "iteration" in row:
            row["iteration"] = int(row["iteration"])
        if names is not None:
            row["ring_names"] = names
        rows.append(row)
    if ds.attrs.get("spectra_file"):
        _read_spectra(_beside(path, str(ds.attrs["spectra_file"])), rows)
    return rows


def split_rows(path, iteration, expected_rows):
    """The rows of the diagnostics file ``path`` up to a snapshot at ``iteration`` and
    those after it: ``(kept, later)`` (lists of rows, :func:`read_rows`).

    Raises :class:`SnapshotError` when ``kept`` does not have the ``expected_rows`` that
    the snapshot counted (the file does not belong to its run), or when the file is
    missing although rows are expected."""
    path = os.fspath(path)
    if not os.path.exists(path):
        if expected_rows:
            raise SnapshotError(
                f"{path} is missing but the snapshot expects {expected_rows} earlier "
                "rows; restore it (or copy the whole run directory) before restarting.")
        return [], []
    rows = read_rows(path)
    kept = [r for r in rows if r["iteration"] <= iteration]
    if len(kept) != expected_rows:
        raise SnapshotError(
            f"{path} has {len(kept)} rows up to iteration {iteration} but the snapshot "
            f"expects {expected_rows}; it does not belong to this run.")
    return kept, [r for r in rows if r["iteration"] > iteration]


class DiagnosticsLog:
    """Rows of diagnostics in memory, written to ``path`` (atomically) after each append.

    Parameters
    ----------
    path : str, the ``diagnostics.nc`` file
    meta : dict, global attributes (case, version, device, …)
    rows : list of earlier rows (a restart: see :meth:`resume`)
    """

    def __init__(self, path, meta, rows=(), history=""):
        self.path, self.meta, self.rows, self.history = os.fspath(path), dict(meta), \
            list(rows), history

    @classmethod
    def resume(cls, path, meta, iteration, expected_rows, history=""):
        """Continue ``path`` after a snapshot at ``iteration``: keep its rows up to that
        iteration (there must be ``expected_rows`` of them) and drop the later ones from
        the log (the file keeps them until the next write).  ``vortexsim restart`` only
        continues a file in place when no later row would be lost (``docs/cli.md``,
        *Run history*); otherwise it writes a branch (:func:`split_rows`)."""
        kept, later = split_rows(path, iteration, expected_rows)
        if later:
            logger.info("diagnostics: dropping %d rows after iteration %d (t = %.6g … %.6g; "
                        "recomputed by the restart)", len(later), iteration, later[0]["t"],
                        later[-1]["t"])
        return cls(path, meta, kept, history)

    def append(self, row):
        """Add ``row`` and rewrite the file; if the write fails the row is dropped again."""
        row = self.add(row)
        try:
            self.write()
        except BaseException:
            self.discard(row)        # the file does not hold it: neither does the log
            raise

    def add(self, row):
        """Add a copy of ``row`` in memory only (its arrays copied); returns the copy.  The
        caller writes the file (:meth:`write` of ``list(self.rows)``, e.g. on the output
        thread) or :meth:`discard` s the row when that fails."""
        row = dict(row)
        for k, v in row.items():
            if isinstance(v, np.ndarray):
                row[k] = v.copy()
        self.rows.append(row)
        return row

    def discard(self, row):
        """Remove the row that :meth:`add` returned (the newest, when failed writes are
        undone newest first)."""
        for i in range(len(self.rows) - 1, -1, -1):
            if self.rows[i] is row:
                del self.rows[i]
                return

    def write(self, rows=None):
        """Rewrite the file atomically with ``rows`` (default: all the rows in memory)."""
        rows = self.rows if rows is None else rows
        if rows and "energy_spectrum" in rows[0]:
            # first the spectra: a diagnostics file never names rows its spectra lack
            spectra = spectra_dataset(rows, self.meta, self.history)
            with atomic_path(_beside(self.path, SPECTRA_FILE)) as tmp:
                _write_netcdf4(spectra, tmp)
        ds = rows_dataset(rows, self.meta, self.history)
        with atomic_path(self.path) as tmp:
            _write_netcdf4(ds, tmp)

    def __len__(self):
        return len(self.rows)
