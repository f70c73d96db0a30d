r"""Case files: TOML loading, ``--set`` overrides, validation, TOML text of a resolved config.

A case file (``cases/leapfrog.toml``) names the case builder and sets its parameters::

    case = "leapfrog"            # the builder (``vortexsim cases`` lists them)

    [physics]
    radius = 1.0                 # R [L], ring radius
    ...
    [output]
    snapshot_interval = 2.0      # [T], time between snapshot files

Tables (``[physics]``, ``[discretization]``, ``[tracers]``, ``[time]``, ``[solver]``,
``[output]``) only group the keys for the reader: keys are flat and unique, so
``--set n_phi=16`` and ``--set discretization.n_phi=16`` are the same.  A key that is not
in a file takes the case's default (:func:`vortexsim.cases.case_defaults`).  ``"auto"``
stands for a value derived at run time (σ from the spacing, dt_min = dt/1000, max_speed
= 100 × max|u| at t₀, snapshot and diagnostics intervals about t_end/10 and t_end/100, as
whole multiples of dt).

Units are those of the case: lengths in L, times in T (the rings have R = 1, Γ = 1, so
T = R²/Γ); values are plain numbers, never strings with units.

Everything here is pure (dicts in, dicts or text out); the CLI wires it to the case
registry.  Errors are :class:`ConfigError` (a ``ValueError``) with a one-line message.
"""
from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import stat
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from ._names import did_you_mean

__all__ = ["ConfigError", "Parameter", "TABLE", "PARAMETER_TABLE", "FROM_CASE", "PARAMETERS",
           "SECTIONS", "RUN_DEFAULTS", "OUTPUT_DEFAULTS", "CLI_ONLY", "parameters_markdown",
           "MAX_CASE_FILE_BYTES", "load_case_file", "load_presets", "PRESETS",
           "parse_assignments", "check_params", "check_limits", "to_toml", "closest"]


class ConfigError(ValueError):
    """A bad case file, ``--set`` option or parameter value (one-line message)."""


#: Table of a key in a case file, in the order they are written.
SECTIONS = ("physics", "discretization", "tracers", "time", "solver", "output")


class _FromCase:
    """The default of a case parameter: each case builder has its own."""

    def __repr__(self):
        return "FROM_CASE"


#: the default of a parameter whose value each case sets (:func:`vortexsim.cases.case_defaults`)
FROM_CASE = _FromCase()

#: kinds of values; bounds of numbers
KINDS = ("float", "int", "bool", "str")
#: the range of a number that the table does not narrow: floats of magnitude up to HUGE
#: (24 decades of case units keep products and squares far from overflow, in float32 too),
#: positive ones at least TINY (a subnormal dt or spacing makes counts infinite); counts
#: up to MAX_COUNT (10¹² elements hold 24 TB: beyond any machine, the memory guard says so)
HUGE, TINY, MAX_COUNT = 1e12, 1e-12, 10 ** 12
BOUNDS = (None, "positive", "nonnegative", "nonzero")
#: who reads a parameter: a case builder, the Simulation (:data:`RUN_DEFAULTS`), the
#: output writers of the command (:data:`OUTPUT_DEFAULTS`)
SCOPES = ("case", "run", "output")


@dataclasses.dataclass(frozen=True, slots=True)
class Parameter:
    """One parameter of a run: its case-file key, default, unit, meaning and validation.

    name : str, the key (``n_phi``)
    section : str, its table in a case file (:data:`SECTIONS`); None for a parameter that
        the command line sets, never a case file (:data:`CLI_ONLY`)
    unit : str, "L" length, "T" time, "L^2/T", "L/T", "degree"; "-" dimensionless
    help : str, its meaning (written beside it in resolved case files and the docs)
    kind : "float" | "int" | "bool" | "str"
    default : the value when none is given (:data:`FROM_CASE`: the case's own; None: "auto"
        where ``auto``, else derived or required at run time)
    scope : "case" | "run" | "output" (:data:`SCOPES`)
    auto : bool, "auto" is accepted (read as None: derived at run time)
    bound : None | "positive" (> 0) | "nonnegative" (>= 0) | "nonzero" (numbers only)
    low, high : the least and greatest number accepted (of its magnitude if "nonzero");
        None: from ``kind`` and ``bound`` (:meth:`limits`); high_open: ``< high``
    """

    name: str
    section: str | None
    unit: str
    help: str
    kind: str = "float"
    default: object = FROM_CASE
    scope: str = "case"
    auto: bool = False
    bound: str | None = None
    low: float | None = None
    high: float | None = None
    high_open: bool = False

    def __post_init__(self):
        if self.section not in (*SECTIONS, None) or self.kind not in KINDS or \
                self.bound not in BOUNDS or self.scope not in SCOPES:
            raise ValueError(f"parameter {self.name!r}: section {self.section!r}, kind "
                             f"{self.kind!r}, bound {self.bound!r}, scope {self.scope!r}; "
                             f"expected one of {SECTIONS}, {KINDS}, {BOUNDS}, {SCOPES}.")

    def limits(self):
        """(low, high) of a number: those given, else counts from 0 (1 if positive) to
        :data:`MAX_COUNT`, floats within ±:data:`HUGE`, of magnitude ≥ :data:`TINY` if
        positive or nonzero ((None, None) for other kinds)."""
        if self.kind == "int":
            low = 1 if self.bound == "positive" else 0
            return (low if self.low is None else self.low,
                    MAX_COUNT if self.high is None else self.high)
        if self.kind != "float":
            return None, None
        low = {"positive": TINY, "nonzero": TINY, "nonnegative": 0.0}.get(self.bound, -HUGE)
        return (low if self.low is None else self.low, HUGE if self.high is None else self.high)


P = Parameter
#: Every parameter of a run, in this order: the case builders' parameters, the run
#: parameters of the Simulation (in the order of :data:`RUN_DEFAULTS`), the output
#: parameters of the command.  Units: L length, T time, "-" dimensionless.
TABLE = (
    # the case builders' parameters (defaults: each case's own)
    P("radius", "physics", "L", "ring radius R", bound="positive"),
    P("circulation", "physics", "L^2/T",
      "ring circulation Gamma (> 0 moves a ring along its axis)", bound="nonzero"),
    P("core", "physics", "L",
      "Gaussian core radius sigma_c of a ring (0: the core is the blob itself)",
      bound="nonnegative"),
    P("spacing", "physics", "L", "distance between the two rings along their axis",
      bound="positive"),
    P("separation", "physics", "L", "distance between the two ring centres", bound="positive"),
    P("angle", "physics", "degree",
      "tilt of each ring axis toward the other, from +z, in [0, 90)", low=0.0, high=90.0,
      high_open=True),
    P("height", "physics", "L", "height of the ring centre above the ground plane",
      bound="positive"),
    P("n_phi", "discretization", "-", "stations around each ring", kind="int",
      bound="positive"),
    P("layers", "discretization", "-",
      "concentric layers of elements in the core (1: centre line only)", kind="int",
      bound="positive"),
    P("layer_spacing", "discretization", "-",
      "layer spacing in units of the core radius sigma_c", bound="positive"),
    P("sigma", "discretization", "L",
      "element core radius; auto = max(2 pi R / n_phi, layer spacing)", auto=True,
      bound="positive"),
    P("tracers_per_ring", "tracers", "-", "passive tracers seeded around each ring",
      kind="int", bound="nonnegative"),
    P("tracer_spread", "tracers", "L",
      "standard deviation of the tracers' offsets across the ring", bound="nonnegative"),
    P("seed", "tracers", "-", "seed of the tracer positions (a 64-bit integer)", kind="int",
      bound="nonnegative", high=2 ** 63 - 2),
    # the periodic cases' parameters (taylor_green, isotropic_turbulence)
    P("n", "discretization", "-", "lattice points per side of the periodic box (n^3 "
      "elements)", kind="int", bound="positive", low=4, high=10 ** 4),
    P("overlap", "discretization", "-", "element core radius sigma / lattice spacing h "
      "(below 0.1 the blobs do not overlap)", bound="positive", low=0.1, high=10.0),
    P("k_peak", "discretization", "1/L",
      "peak wavenumber of the initial spectrum k^4 exp(-2 (k/k_peak)^2)", bound="positive"),
    P("energy", "discretization", "L^2/T^2", "initial 1/2 <|u|^2>", bound="positive"),
    P("tracers", "tracers", "-", "passive tracers, uniform in the box", kind="int",
      bound="nonnegative"),
    # the run parameters of the Simulation
    P("dt", "time", "T", "time step (the largest step when adaptive = true)", default=None,
      scope="run", bound="positive"),
    P("t_end", "time", "T", "end time of the run", default=None, scope="run",
      bound="positive"),
    P("integrator", "time", "-", "euler | rk2 | rk4", kind="str", default="rk4", scope="run"),
    P("kernel", "discretization", "-",
      "cutoff kernel: gaussian | algebraic | winckelmans | polynomial | singular | "
      "gaussian4 | gaussian6 (the last two: periodic spectral sum only)", kind="str",
      default="gaussian", scope="run"),
    P("method", "solver", "-", "direct | fmm | auto | spectral, mesh (periodic box)",
      kind="str", default="direct", scope="run"),
    P("tol", "solver", "-", "FMM relative accuracy of u (grad u: 10 tol), 1e-9 to 1e-2",
      default=1e-6, scope="run", bound="positive", low=1e-15, high=1.0, high_open=True),
    P("precision", "solver", "-", "float64 | float32 (float32: summation only)", kind="str",
      default="float64", scope="run"),
    P("device", "solver", "-", "auto (GPU if CuPy sees one) | cpu | gpu", kind="str",
      default="auto", scope="run"),
    P("stretching", "solver", "-",
      "transpose (conserves total vorticity) | classical (periodic box: minus its mean, so "
      "the total stays zero)", kind="str", default="transpose", scope="run"),
    P("nu", "physics", "L^2/T", "kinematic viscosity (0: inviscid; > 0: core spreading)",
      default=0.0, scope="run", bound="nonnegative"),
    P("viscous", "physics", "-",
      "viscous model: core_spreading | pse (particle strength exchange) | lattice (exact "
      "diffusion on the periodic remeshing lattice)", kind="str", default="core_spreading",
      scope="run"),
    P("pse_order", "physics", "-", "order in epsilon of the PSE kernel: 2 (Gaussian) | 4",
      kind="int", default=2, scope="run", low=2, high=4),
    P("boundary", "physics", "-",
      "free (free space) | ground (plane z = ground_z, by images) | periodic (the box "
      "[0, box)^3; method spectral (gaussian kernels) or fmm; CPU and GPU)", kind="str",
      default="free", scope="run"),
    P("ground_z", "physics", "L", "height of the ground plane", default=0.0, scope="run"),
    P("box", "physics", "L", "edge of the periodic box (boundary = periodic)", default=None,
      scope="run", auto=True, bound="positive"),
    P("remesh_every", "discretization", "-",
      "steps between two remeshings onto the lattice (0: never)", kind="int", default=0,
      scope="run", bound="nonnegative"),
    P("remesh_spacing", "discretization", "L", "lattice spacing h of the remeshing",
      default=None, scope="run", auto=True, bound="positive"),
    P("remesh_overlap", "discretization", "-", "core radius / h after a remeshing",
      default=None, scope="run", auto=True, bound="positive", low=0.1, high=10.0),
    P("remesh_threshold", "discretization", "-",
      "free space: nodes with |alpha| <= this x max |alpha| are dropped", default=1e-6,
      scope="run", bound="nonnegative", high=1.0, high_open=True),
    P("remesh_project", "discretization", "-",
      "periodic box: make the lattice strengths divergence-free (and their sum zero) after "
      "each remeshing", kind="bool", default=False, scope="run"),
    P("adaptive", "time", "-",
      "adaptive step dt = courant / max |grad u| (bounded by dt and dt_min)", kind="bool",
      default=False, scope="run"),
    P("courant", "time", "-", "C of the adaptive rule, in (0, 2]", default=0.1, scope="run",
      bound="positive", high=2.0),
    P("dt_min", "time", "T", "smallest adaptive step; auto = dt / 1000", default=None,
      scope="run", auto=True, bound="positive"),
    P("max_speed", "solver", "L/T", "blow-up bound on |u|; auto = 100 x max |u| at t0",
      default=None, scope="run", auto=True, bound="positive", high=math.inf),
    P("root_slack", "solver", "-", "FMM root-cube margin, fraction of the box width",
      default=0.05, scope="run", bound="positive", high=10.0),
    P("progress", None, "-", "progress bar in Simulation.run (the command: off with -q)",
      kind="bool", default=True, scope="run"),
    # the output parameters of the command
    P("snapshot_interval", "output", "T",
      "time between snapshot (= checkpoint) files; auto = about t_end / 10, a multiple of "
      "dt", default=None, scope="output", auto=True, bound="positive"),
    P("diagnostics_interval", "output", "T",
      "time between rows of diagnostics.nc; auto = about snapshot_interval / 10, a "
      "multiple of dt", default=None, scope="output", auto=True, bound="positive"),
    P("plot", "output", "-", "write plot.png at the end of the run (needs matplotlib)",
      kind="bool", default=True, scope="output"),
)
del P

#: {key: Parameter} of :data:`TABLE`
PARAMETER_TABLE = {p.name: p for p in TABLE}

#: key: (table, unit, description) of every case-file key
PARAMETERS = {p.name: (p.section, p.unit, p.help) for p in TABLE if p.section is not None}

#: Run parameters of the Simulation and their defaults (``Simulation(elements, **run)``).
RUN_DEFAULTS = {p.name: p.default for p in TABLE if p.scope == "run"}

#: Output parameters (read by the CLI, not by the simulation) and their defaults.
OUTPUT_DEFAULTS = {p.name: p.default for p in TABLE if p.scope == "output"}

#: Run parameters that the command line sets, never a case file.
CLI_ONLY = tuple(p.name for p in TABLE if p.section is None)

_INT = tuple(p.name for p in TABLE if p.kind == "int")
_BOOL = tuple(p.name for p in TABLE if p.kind == "bool" and p.section is not None)
_STR = tuple(p.name for p in TABLE if p.kind == "str")
_AUTO = tuple(p.name for p in TABLE if p.auto)
_POSITIVE = tuple(p.name for p in TABLE if p.bound == "positive")
_NONNEGATIVE = tuple(p.name for p in TABLE if p.bound == "nonnegative")
_NONZERO = tuple(p.name for p in TABLE if p.bound == "nonzero")



def closest(key, known):
    """`` (did you mean 'x'?)`` for the closest of ``known``, or ``""``."""
    return did_you_mean(key, known, parenthetical=True)


def _flatten(doc, where):
    """Flat {key: value} of a case-file document; tables only group keys."""
    flat, origin = {}, {}
    for key, value in doc.items():
        if key == PRESETS:              # named sets of overrides (:func:`load_presets`)
            continue
        if isinstance(value, dict):
            if key not in SECTIONS:
                raise ConfigError(f"{where}: unknown table [{key}]{closest(key, SECTIONS)}; "
                                  f"tables are {', '.join(SECTIONS)}.")
            items = [(f"{key}.{k}", k, v) for k, v in value.items()]
        else:
            items = [(key, key, value)]
        for label, k, v in items:
            if isinstance(v, dict):
                raise ConfigError(f"{where}: [{label}] is nested too deep; write '{k}' "
                                  "as a plain key of one table.")
            if k in flat:
                raise ConfigError(f"{where}: '{k}' is set twice ({origin[k]} and {label}).")
            flat[k], origin[k] = v, label
    return flat


#: the largest case file read [bytes]: the shipped ones are about 3 kB; anything larger
#: (``/dev/zero``, a log passed by mistake) is refused before it is read
MAX_CASE_FILE_BYTES = 1 << 20


def _loads(text, what):
    """``tomllib.loads(text)``; ConfigError for invalid TOML and for nesting too deep for
    the parser (a RecursionError, e.g. ``x = [[[[...`` 5000 deep)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} is not valid TOML: {exc}.") from None
    except RecursionError:
        raise ConfigError(f"{what} is not a case file: its arrays or tables are nested too "
                          "deeply to read (case files use plain tables and values).") from None


def _read_toml(path):
    """The TOML document of a case file; ConfigError for a missing, unreadable, non-regular
    (a device, a FIFO, a directory), too large (> :data:`MAX_CASE_FILE_BYTES`), not UTF-8 or
    invalid file, checked before it is parsed."""
    def check(info):       # before open (a FIFO would block it) and of the opened file
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"case file {path} is a directory; give the path of a .toml "
                              "case file.")
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"case file {path} is not a regular file; give the path of a "
                              ".toml case file.")
        if info.st_size > MAX_CASE_FILE_BYTES:
            raise ConfigError(f"case file {path} has {info.st_size} bytes, more than a case "
                              f"file can have ({MAX_CASE_FILE_BYTES} bytes); give the path "
                              "of a .toml case file.")

    try:
        check(os.stat(path))
        with open(path, "rb", buffering=0) as fh:
            check(os.fstat(fh.fileno()))
            data = fh.read(MAX_CASE_FILE_BYTES + 1)   # bounded even if the file grows
    except FileNotFoundError:
        raise ConfigError(f"case file {path} does not exist.") from None
    except OSError as exc:
        raise ConfigError(f"cannot read case file {path}: {exc}.") from None
    if len(data) > MAX_CASE_FILE_BYTES:
        raise ConfigError(f"case file {path} has more than {MAX_CASE_FILE_BYTES} bytes; give "
                          "the path of a .toml case file.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read case file {path}: not UTF-8 text ({exc}).") from None
    return _loads(text, path)


def load_case_file(path):
    """Read a case file: ``(case_name, {key: value})``, tables flattened.

    Raises :class:`ConfigError` for a missing, unreadable, non-regular or too large file
    (:data:`MAX_CASE_FILE_BYTES`), invalid or too deeply nested TOML, a missing or
    non-string ``case`` key or a key set twice.  Values are checked later (:func:`check_params`).
    """
    path = os.fspath(path)
    flat = _flatten(_read_toml(path), path)
    if "case" not in flat:
        raise ConfigError(f"{path}: missing top-level key case = \"NAME\" naming the case "
                          "builder (vortexsim cases lists them).")
    case = flat.pop("case")
    if not isinstance(case, str) or not case:
        raise ConfigError(f"{path}: case must be a string naming the case builder, e.g. "
                          f"case = \"single_ring\" (vortexsim cases lists them), got "
                          f"{case!r}.")
    return case, flat


#: the case-file table of named overrides: ``[presets.gpu]`` holds plain keys
PRESETS = "presets"


def load_presets(path):
    """The named presets of a case file: ``{name: {key: value}}`` from its
    ``[presets.NAME]`` tables (plain keys of any table, e.g. ``n_phi = 129``), in file
    order; {} when it has none.  Values are checked when used (:func:`check_params`)."""
    path = os.fspath(path)
    presets = _read_toml(path).get(PRESETS, {})
    if not isinstance(presets, dict):
        raise ConfigError(f"{path}: '{PRESETS}' must be a table of tables [presets.NAME].")
    out = {}
    for name, values in presets.items():
        if not isinstance(values, dict) or any(isinstance(v, dict) for v in values.values()):
            raise ConfigError(f"{path}: [presets.{name}] must hold plain key = value pairs.")
        out[name] = dict(values)
    return out


def parse_assignments(items):
    """``["n_phi=16", "kernel=algebraic", "time.dt=0.05"]`` → ``{"n_phi": 16, ...}``.

    A value is read as a TOML value (``16`` int, ``0.05`` float, ``true``, ``"text"``);
    anything that is not valid TOML is taken as a bare string (``kernel=algebraic``).
    A ``table.`` prefix is dropped.
    """
    out = {}
    for item in items or ():
        key, sep, text = str(item).partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {item!r}.")
        if "." in key:
            table, _, key = key.rpartition(".")
            if table not in SECTIONS:
                raise ConfigError(f"--set {item}: unknown table {table!r}"
                                  f"{closest(table, SECTIONS)}; tables are {', '.join(SECTIONS)}.")
        try:
            value = tomllib.loads(f"v = {text}")["v"] if text else ""
        except tomllib.TOMLDecodeError:
            value = text
        except RecursionError:
            raise ConfigError(f"--set {key}: the value is nested too deeply to read.") from None
        out[key] = value
    return out


def _kind(key, default):
    if key in _BOOL:
        return "bool"
    if key in _INT:
        return "int"
    if key in _STR:
        return "str"
    if key in PARAMETERS or isinstance(default, float):
        return "float"
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, str):
        return "str"
    return "any"


def _unit(key):
    unit = PARAMETERS.get(key, (None, "-"))[1]
    return "dimensionless" if unit == "-" else f"in {unit}"


def _check_value(key, value, default, where):
    """Type- and range-checked value (None for "auto")."""
    kind = _kind(key, default)
    pre = f"{where}{key}"
    if key in _AUTO and (value is None or value == "auto"):
        return None
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{pre} must be true or false, got {value!r}.")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{pre} must be a string, got {value!r}.")
        return value
    if kind in ("int", "float"):
        auto = " or \"auto\"" if key in _AUTO else ""
        if isinstance(value, str):
            raise ConfigError(
                f"{pre} must be a number ({_unit(key)}){auto}, got the string {value!r}; "
                "case files are in case units (lengths L, times T), so write the bare number.")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{pre} must be a number ({_unit(key)}){auto}, got {value!r}.")
        if isinstance(value, float) and not math.isfinite(value) and not (
                key in PARAMETER_TABLE and value == PARAMETER_TABLE[key].high):  # max_speed
            raise ConfigError(f"{pre} must be finite, got {value!r}.")
        if kind == "int" and isinstance(value, float) and value != int(value):
            raise ConfigError(f"{pre} must be an integer, got {value!r}.")
        if key in _POSITIVE and not value > 0:
            raise ConfigError(f"{pre} must be > 0, got {value!r}.")
        if key in _NONNEGATIVE and not value >= 0:
            raise ConfigError(f"{pre} must be >= 0, got {value!r}.")
        if key in _NONZERO and value == 0:
            raise ConfigError(f"{pre} must not be 0.")
        if key in PARAMETER_TABLE:        # before float(): an int may not fit in one
            _check_range(PARAMETER_TABLE[key], value, pre)
        return int(value) if kind == "int" else float(value)
    return value


def _range_text(p):
    """``from 1 to 1000000000000`` or ``from 0 to below 90`` (None for other kinds)."""
    low, high = p.limits()
    if low is None:
        return None
    text = "{:,}".format if p.kind == "int" else "{:g}".format
    what = "of magnitude " if p.bound == "nonzero" else ""
    return f"{what}from {text(low)} to {'below ' if p.high_open else ''}{text(high)}"


def _check_range(p, value, pre):
    """ConfigError unless the number ``value`` is within the limits of parameter ``p``
    (:meth:`Parameter.limits`); ints and floats are compared exactly."""
    low, high = p.limits()
    if low is None:
        return
    size = abs(value) if p.bound == "nonzero" else value
    if not (low <= size and (size < high if p.high_open else size <= high)):
        kind = ("an integer " if p.kind == "int" else "a number ") + \
            {"positive": "> 0, ", "nonnegative": ">= 0, "}.get(p.bound, "")
        got = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:20]}..."
        raise ConfigError(f"{pre} must be {kind}{_range_text(p)} ({_unit(p.name)}), got "
                          f"{got}; set a value in that range.")


def check_params(params, defaults, where=""):
    """Validate ``params`` against the known keys and types of ``defaults``.

    Parameters
    ----------
    params : dict, flat {key: value} from a case file and ``--set``
    defaults : dict, every accepted key and its default (the case's defaults, the run
        parameters and :data:`OUTPUT_DEFAULTS`); a key's kind (int, float, bool, str)
        comes from :data:`PARAMETERS` or from its default
    where : str, prefix of error messages (e.g. ``"cases/leapfrog.toml: "``)

    Returns
    -------
    dict, the checked values (ints as int, numbers as float, ``"auto"`` as None).

    Raises :class:`ConfigError` for an unknown key (naming the closest known one), a
    wrong type, a string where a number belongs (units are not written), NaN/inf, or a
    value out of range (N, dt, σ, intervals > 0; counts, ν ≥ 0; Γ ≠ 0).
    """
    known = [k for k in defaults if k not in CLI_ONLY]
    out = {}
    for key, value in params.items():
        if key == "case":
            raise ConfigError(f"{where}'case' cannot be changed here; give the case name or "
                              "file as the first argument.")
        if key not in known:
            raise ConfigError(f"{where}unknown key {key!r}{closest(key, known)}; "
                              "vortexsim cases lists the cases, and the case files list "
                              "every key.")
        out[key] = _check_value(key, value, defaults.get(key), where)
    return out


def check_limits(params, where=""):
    """ConfigError for a number of ``params`` ({key: value}) that is not finite or outside
    the range of its parameter (:meth:`Parameter.limits`); other keys and values are left
    to their own checks; :func:`vortexsim.make_case` checks every value it is given."""
    for key, value in params.items():
        p = PARAMETER_TABLE.get(key)
        if p is None or p.kind not in ("int", "float") or isinstance(value, bool) or \
                not isinstance(value, numbers.Real):
            continue
        value = value.item() if hasattr(value, "item") else value    # NumPy scalars
        if isinstance(value, float) and math.isnan(value):     # ±inf: out of range
            raise ConfigError(f"{where}{key} must be a number, got {value!r}.")
        _check_range(p, value, f"{where}{key}")


def _toml_value(v):
    if v is None:
        return '"auto"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(a) for a in v) + "]"
    raise TypeError(f"cannot write {v!r} ({type(v).__name__}) as a TOML value.")


def to_toml(case, params, header="", derived=None):
    """TOML text of a case file: ``case = ...`` and ``params`` in their tables, with units.

    ``load_case_file`` of the text gives back ``case`` and ``params`` exactly (floats are
    written with ``repr``, so they round-trip bitwise; None is written as "auto").
    ``derived`` ({key: value}) is written as comments only (not read back).
    """
    lines = [f"# {line}".rstrip() for line in header.splitlines()] if header else []
    lines.append(f"case = {_toml_value(case)}")
    tables = {s: [] for s in SECTIONS}
    other = []
    for key, value in params.items():
        if key in CLI_ONLY:
            continue
        section, unit, doc = PARAMETERS.get(key, (None, "", ""))
        text = f"{key} = {_toml_value(value)}"
        comment = f"  # [{unit}] {doc}" if doc else ""
        (tables[section] if section else other).append(text + comment)
    if other:  # case parameters without an entry in PARAMETERS (new cases)
        tables["physics"] = other + tables["physics"]
    for section in SECTIONS:
        if tables[section]:
            lines += ["", f"[{section}]"] + tables[section]
    if derived:
        lines += ["", "# derived (not read back):"]
        lines += [f"#   {k} = {json.dumps(v)}" for k, v in derived.items()]
    return "\n".join(lines) + "\n"


def _default_text(p):
    if p.default is None and p.auto:
        return "auto"
    if p.default is FROM_CASE or p.default is None:     # None: each case sets dt and t_end
        return "the case's"
    return f"`{_toml_value(p.default)}`"


def _bound_text(p):
    if p.kind in ("int", "float"):
        return ("!= 0, " if p.bound == "nonzero" else "") + _range_text(p)
    return ""


def parameters_markdown():
    """The text of ``docs/parameters.md``: every parameter of :data:`TABLE`, one table
    per case-file section (the command line's own last), with default, unit, kind and
    meaning.  ``tests/test_config.py`` checks that the committed file equals it."""
    lines = ["# Parameters", "",
             "Every parameter of a run: its key in a case file (the `[section]` tables only "
             "group the keys; `--set key=value` sets any of them), default, unit, kind and "
             "meaning.  Units are the case's: L length, T time; `-` is dimensionless.  "
             "\"auto\" values are derived at run time; \"the case's\" defaults are set by "
             "each case (`vortexsim run CASE --dry-run` prints them).", "",
             "Generated from `vortexsim/config.py` (`TABLE`) by "
             "`python -c \"from vortexsim.config import parameters_markdown as m; "
             "print(m(), end='')\" > docs/parameters.md`; do not edit by hand.", ""]
    for section in (*SECTIONS, None):
        rows = [p for p in TABLE if p.section == section]
        title = f"[{section}]" if section else "Set by the command line, never a case file"
        lines += [f"## {title}", "",
                  "| key | default | unit | kind | meaning |",
                  "|---|---|---|---|---|"]
        for p in rows:
            kind = p.kind + (f" {_bound_text(p)}" if _bound_text(p) else "") + \
                (" or \"auto\"" if p.auto else "")
            text = p.help.replace("|", "\\|")
            lines.append(f"| `{p.name}` | {_default_text(p)} | {p.unit} | {kind} | {text} |")
        lines.append("")
    return "\n".join(lines)
