r"""Case registry: named builders of simulations, ``make_case`` and ``from_config``.

A case is a function ``builder(**case_params) -> CaseSetup`` registered with
:func:`register_case` together with its default run parameters (dt, t_end, boundary …,
see :data:`vortexsim.config.RUN_DEFAULTS`).  ``make_case(name, **overrides)`` splits
the overrides into case and run parameters (unknown names raise with the closest
match), builds the state and returns a :class:`vortexsim.Simulation` whose ``config``
holds every resolved value; ``from_config(config)`` rebuilds the same simulation from that
dict (or from a hand-written one: ``{"case": "leapfrog", "n_phi": 64}``).
"""
from __future__ import annotations

import dataclasses
import inspect
import json

import numpy as np

from .._names import did_you_mean
from ..output.cf import GENERIC_UNITS
from ..output.checksum import has_groups
from ..config import RUN_DEFAULTS, check_limits
from ..simulation import Simulation

__all__ = ["CaseSetup", "CASES", "register_case", "get_case", "list_cases", "make_case",
           "from_config", "case_defaults"]


@dataclasses.dataclass
class CaseSetup:
    """What a case builder returns.

    Attributes
    ----------
    x, alpha : ndarray (N, 3) [L], [L³/T]; sigma : ndarray (N,) [L]
    tracers : ndarray (M, 3) [L]
    groups : list of :class:`vortexsim.state.ElementGroup`
    resolved : dict, case parameters the builder derived (e.g. the default σ)
    volume : ndarray (N,) [L³] or None (not known)
    run : dict, run parameters the builder derives (e.g. the remeshing lattice spacing),
        applied unless the caller gives them
    files : dict, file name → ``write(path, config, attrs)``: files of the case that
        ``vortexsim run`` writes into a fresh run directory, once, before the first step
        (never on restart), e.g. ``initial_field.nc``.  ``write`` writes ``path``
        atomically from the resolved ``config`` (``sim.config``), adding the global
        attributes ``attrs`` (source, history).  :func:`make_case` hands them on as
        ``sim.case_files``.
    """

    x: np.ndarray
    alpha: np.ndarray
    sigma: np.ndarray
    tracers: np.ndarray
    groups: list
    resolved: dict = dataclasses.field(default_factory=dict)
    volume: np.ndarray | None = None
    run: dict = dataclasses.field(default_factory=dict)
    files: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    builder: object
    run_defaults: dict
    doc: str
    #: (length, time): what the case's units L and T are, for the files' ``length_unit``
    #: and ``time_unit`` attributes (:mod:`vortexsim.output.cf`)
    units: tuple = GENERIC_UNITS

    def params(self):
        """The builder's parameters and their defaults."""
        sig = inspect.signature(self.builder)
        return {k: p.default for k, p in sig.parameters.items()}


CASES: dict[str, Case] = {}

#: config keys that are derived, not inputs
_DERIVED = ("case", "t0", "groups", "n_elements", "n_tracers")


def register_case(name, units=GENERIC_UNITS, **run_defaults):
    """Decorator registering ``builder`` as case ``name`` with default run parameters.

    ``units``: (length, time), one line each saying what the case's units L and T are
    (e.g. ``("L = ring radius R", "T = R^2/Gamma")``); the run's files carry them as
    ``length_unit`` and ``time_unit``."""
    if not (isinstance(units, tuple) and len(units) == 2
            and all(isinstance(u, str) and u for u in units)):
        raise ValueError(f"units of case {name!r} must be two texts (length, time), got "
                         f"{units!r}.")
    bad = sorted(set(run_defaults) - set(RUN_DEFAULTS))
    if bad:
        raise ValueError(f"unknown run parameters {bad} for case {name!r}.")

    def wrap(builder):
        if name in CASES:
            raise ValueError(f"case {name!r} is already registered.")
        doc = (builder.__doc__ or "").strip().splitlines()[0] if builder.__doc__ else ""
        CASES[name] = Case(name, builder, dict(run_defaults), doc, units)
        return builder
    return wrap


def get_case(name) -> Case:
    """Look a case up by name; the error lists the cases and the closest match."""
    if name in CASES:
        return CASES[name]
    raise ValueError(f"Unknown case {name!r}; expected one of {sorted(CASES)}."
                     f"{did_you_mean(name, CASES)}")


def list_cases():
    """{name: one-line description} of the registered cases."""
    return {name: c.doc for name, c in sorted(CASES.items())}


def case_defaults(name):
    """All default parameters of a case: its own and the run parameters (a dict)."""
    case = get_case(name)
    return {**case.params(), **RUN_DEFAULTS, **case.run_defaults}


def _jsonable(v):
    if isinstance(v, (tuple, list, np.ndarray)):
        return [_jsonable(a) for a in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def make_case(name, *, communicator=None, state=None, **overrides) -> Simulation:
    """Build the simulation of case ``name`` with parameter ``overrides``.

    Parameters are the case's own (``case_defaults(name)`` lists them with the run
    parameters of :class:`vortexsim.Simulation`).  Example::

        sim = vortexsim.make_case("leapfrog", n_phi=64, dt=0.05, device="gpu", method="fmm")

    ``communicator``: the processes that run it together (the model's; default one).
    ``state``: a snapshot's state (``Snapshot.state`` of format 3: with the element
    volumes, labels and groups) to build the model from instead of the case's initial
    state, for a restart that picks that state up next (:func:`from_config`); the case
    is then not built (an isotropic turbulence field at 512³ takes 10–45 s and tens of
    GB on every rank), so ``overrides`` must hold its resolved run parameters, as a
    snapshot's config does.  Where the ranks of ``communicator`` will hold the state
    split by slabs, a case with a ``builder.slab`` builds only each rank's rows
    (:func:`_slab_builder`).
    """
    case = get_case(name)
    case_params = case.params()
    unknown = sorted(set(overrides) - set(case_params) - set(RUN_DEFAULTS))
    if unknown:
        known = sorted(set(case_params) | set(RUN_DEFAULTS))
        msgs = [f"{k!r}{did_you_mean(k, known, parenthetical=True)}" for k in unknown]
        raise ValueError(f"Unknown parameter(s) {', '.join(msgs)} for case {name!r}; "
                         f"expected some of {known}.")
    check_limits(overrides)          # every number within its range, before any build
    params = {k: overrides.get(k, v) for k, v in case_params.items()}
    if state is not None and has_groups(state):
        return _from_state(name, case, params, state, communicator, overrides)
    # by slabs only for a fresh run (a state of formats 1 and 2 is loaded whole next)
    slab = None if state is not None else _slab_builder(case, params, overrides,
                                                        communicator)
    if slab is not None:
        setup = slab(params, communicator)
    else:
        on_device = _device_builder(case, overrides)
        setup = case.builder(**params) if on_device is None else on_device(params)
    # the case's derived run parameters, unless the caller gives them ("auto", None:
    # not given)
    run = {**case.run_defaults, **setup.run,
           **{k: v for k, v in overrides.items()
              if k in RUN_DEFAULTS and not (v is None and k in setup.run)}}
    params.update(setup.resolved)
    params = {k: _jsonable(v) for k, v in params.items()}
    elements = (setup.x, setup.alpha, setup.sigma) + (
        () if setup.volume is None else (setup.volume,))
    sim = Simulation(elements, setup.tracers, groups=setup.groups,
                     case=name, case_params=params, communicator=communicator,
                     own_slab=slab is not None, **run)
    sim.case_files = dict(setup.files)   # written by `vortexsim run` (CaseSetup.files)
    return sim


def _slab_builder(case, params, overrides, communicator):
    """The case's builder of one rank's rows (``builder.slab(params, communicator)``:
    a :class:`CaseSetup` of this rank's x-slab of the n³ lattice) where the run will
    hold its state split by slabs
    (:func:`vortexsim.model.slab_partition.splits_by_slabs`), so that no rank builds the
    whole state; else None (the whole state on every rank, as on one)."""
    from ..model.slab_partition import splits_by_slabs  # noqa: PLC0415
    slab = getattr(case.builder, "slab", None)
    ranks = 1 if communicator is None else int(communicator.size)
    # the builders' lattice spans the case's own box: another box is not split
    if slab is None or ranks == 1 or overrides.get("box", None) not in (
            None, case.run_defaults.get("box")):
        return None
    config = {**RUN_DEFAULTS, **case.run_defaults, **params,
              **{k: v for k, v in overrides.items() if k in RUN_DEFAULTS}}
    return slab if splits_by_slabs(config, ranks) else None


def _device_builder(case, overrides):
    """The case's builder of its state on the run's GPU (``builder.on_device(params,
    xp)``, bound to CuPy) where it has one and the run is on a GPU, else None: the large
    lattice cases make their n³ arrays there instead of on the host."""
    build = getattr(case.builder, "on_device", None)
    if build is None:
        return None
    from ..backend import resolve_device  # noqa: PLC0415
    device = resolve_device(overrides.get("device", case.run_defaults.get(
        "device", RUN_DEFAULTS["device"])))
    if device.kind != "gpu":
        return None
    return lambda params: build(params, device.xp)


def _from_state(name, case, params, state, communicator, overrides):
    """:func:`make_case` of a snapshot's ``state`` (format 3): its elements, tracers and
    groups, the run parameters of ``overrides`` over the case's defaults; a state with
    ``rows`` holds this rank's rows of a state split by slabs
    (:func:`vortexsim.cli.restart.snapshot_on_ranks`)."""
    el = state["elements"]
    run = {**case.run_defaults, **{k: v for k, v in overrides.items() if k in RUN_DEFAULTS}}
    params = {k: _jsonable(v) for k, v in params.items()}
    sim = Simulation((el["x"], el["alpha"], el["sigma"], el["volume"]),
                     np.asarray(state["tracers"]["x"]).reshape(-1, 3),
                     groups=list(state["groups"]), case=name, case_params=params,
                     communicator=communicator, own_slab=state.get("rows") is not None,
                     **run)
    sim.case_files = {}                  # the case's files belong to the first run
    return sim


def from_config(config, *, communicator=None, state=None) -> Simulation:
    """Rebuild a simulation from a config dict (``sim.config``, or a hand-written one with
    at least ``"case"``; a JSON string is accepted too).  Derived entries (t0, groups,
    n_elements, n_tracers) are ignored, except ``t0``, which sets the initial time.
    ``state``: a snapshot's state to build it from, for a restart that picks it up
    (:func:`make_case`)."""
    if isinstance(config, str):
        config = json.loads(config)
    if "case" not in config or config["case"] is None:
        raise ValueError("config has no 'case' entry; from_config rebuilds case simulations "
                         f"(one of {sorted(CASES)}). Build others with vortexsim.Simulation.")
    overrides = {k: v for k, v in config.items() if k not in _DERIVED}
    # resolved summation details that are not inputs
    sim = make_case(config["case"], communicator=communicator, state=state, **overrides)
    if config.get("t0") is not None and float(config["t0"]) != sim.t:
        sim.t = float(config["t0"])
        sim.config["t0"] = sim.t
    return sim
