r"""How vortexsim's files meet the CF conventions (1.10): units, the time coordinate,
the case's scales.

vortexsim computes in the case's units, L (length) and T (time): the ring cases take
the ring radius R as L and R²/Γ as T, the periodic cases L = box/(2π) and T = 1/(U k).
CF asks for UDUNITS unit strings, in which "L" is a litre and "T" a tesla, so

* every variable's ``units`` is ``"1"`` (UDUNITS' dimensionless number) and its
  dimension in the case's units goes to ``case_units`` (e.g. ``"L^3/T"`` for a vector
  strength, vorticity × volume) and to the end of its ``long_name`` (", in L^3/T"), so
  that the axis labels of xarray's own plots (``long_name [units]``) carry it:
  "kinetic energy (per unit density), in L^5/T^2 [1]"; a pure number has
  ``units = "1"``, no ``case_units`` and its plain ``long_name`` (:func:`variable_attrs`);
* the global attributes ``length_unit`` and ``time_unit`` say what L and T are in the
  run's case (from the case registry, :func:`vortexsim.cases.registry.register_case`),
  and ``units_note`` says how to read the two attributes above;
* the time coordinate is named ``t`` (:data:`TIME`), with ``long_name`` "simulated
  time" and ``case_units`` "T".  CF (§4.4) wants a coordinate that the checker takes for time (one
  named ``time``, or with standard_name "time" or axis "T") in ``<unit> since
  <epoch>``, which xarray would decode into dates; a nondimensional time has no epoch,
  so ours is a plain coordinate that xarray keeps as numbers.

Files of format 3 and older named the coordinate and dimension ``time`` and wrote the
case's unit strings into ``units``; :func:`with_current_names` gives their datasets the
current names, so that restarts and the readers take both.
"""
from __future__ import annotations

__all__ = ["TIME", "OLD_TIME", "UNITS_NOTE", "GENERIC_UNITS", "variable_attrs", "time_attrs",
           "unit_attrs", "unit_label", "with_current_names"]

#: the name of the time dimension and coordinate (format 4 on)
TIME = "t"
#: its name in files of format 3 and older
OLD_TIME = "time"
#: (length_unit, time_unit) of a run whose case does not say (the case registry's
#: ``units`` give each named case its own)
GENERIC_UNITS = ("L, the unit of the case's lengths", "T, the unit of the case's times")
UNITS_NOTE = ("Quantities are numbers in the case's units: L (length) and T (time), said "
              "by the global attributes length_unit and time_unit. Each variable's units "
              "is '1' (dimensionless, UDUNITS) and its attribute case_units gives its "
              "dimension in L and T, e.g. L^3/T for vorticity x volume; its long_name "
              "ends with it (', in L^3/T').")


def variable_attrs(units, long_name):
    """``{"units": "1", "case_units": units, "long_name": f"{long_name}, in {units}"}`` for
    a quantity of dimension ``units`` in the case's L and T (``"1"``, ``"-"`` or ``""``: a
    pure number, no ``case_units`` and ``long_name`` as given).  ``units`` stays UDUNITS'
    "1" (CF); the case's unit in ``long_name`` is what xarray's plot labels show."""
    if units in ("1", "-", ""):
        return {"units": "1", "long_name": long_name}
    return {"units": "1", "long_name": f"{long_name}, in {units}", "case_units": units}


def unit_attrs(meta):
    """The global attributes ``length_unit``, ``time_unit`` and ``units_note`` of a file
    of the run whose global attributes are ``meta`` (the case's units when it gives
    them, else :data:`GENERIC_UNITS`)."""
    return {"length_unit": str(meta.get("length_unit") or GENERIC_UNITS[0]),
            "time_unit": str(meta.get("time_unit") or GENERIC_UNITS[1]),
            "units_note": UNITS_NOTE}


def time_attrs():
    """The attributes of the time coordinate :data:`TIME` (dimension T of the case)."""
    return variable_attrs("T", "simulated time")


#: the variable of the ring names in a diagnostics file (an auxiliary coordinate of the
#: dimension ``ring``)
RING_NAME = "ring_name"


def with_current_names(ds):
    """``ds`` (an xarray Dataset of a snapshot, diagnostics or spectra file) in the layout
    readers use: the time dimension and coordinate named :data:`TIME` (files of format 3
    and older call them :data:`OLD_TIME`) and the ring names as the index coordinate
    ``ring`` (files store them as the auxiliary coordinate :data:`RING_NAME`, since a CF
    coordinate variable is numeric; older files as ``ring`` itself)."""
    if RING_NAME in ds.variables and "ring" not in ds.variables:
        ds = ds.set_coords(RING_NAME).rename_vars({RING_NAME: "ring"}).set_xindex("ring")
    if TIME in ds.variables or TIME in ds.dims or not (OLD_TIME in ds.variables
                                                       or OLD_TIME in ds.dims):
        return ds
    return ds.rename({OLD_TIME: TIME})


def bare_long_name(attrs):
    """A variable's ``long_name`` without the ", in <case_units>" that
    :func:`variable_attrs` ends it with (for text that shows the unit apart)."""
    name, unit = str(attrs.get("long_name", "")), attrs.get("case_units")
    suffix = f", in {unit}"
    return name[:-len(suffix)] if unit and name.endswith(suffix) else name


def unit_label(attrs):
    """The dimension of a variable in the case's units, for labels: its ``case_units``,
    else its ``units`` (files of format 3 and older held the case's units there)."""
    return str(attrs.get("case_units", attrs.get("units", "")))
