"""A restart builds its simulation from the snapshot's state (``from_config(config,
state=...)``), not from the case's builder: the continuation equals the one rebuilt
through the builder and picked up, bit for bit, and the builder is not called."""
import dataclasses
import functools

import numpy as np
import pytest

import vortexsim
from vortexsim.cases import registry

CASES = {
    "leapfrog": dict(n_phi=16, layers=1, method="direct", dt=0.05, device="cpu",
                     progress=False),
    "isotropic_turbulence": dict(n=8, dt=0.05, device="cpu", progress=False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_restart_from_a_state_skips_the_builder_and_continues_alike(name, monkeypatch):
    sim = vortexsim.make_case(name, **CASES[name])
    sim.run(steps=2)
    state, config = sim.state_dict(), sim.config
    again = vortexsim.from_config(config)              # through the builder
    again.pickup(state)
    again.run(steps=2)

    case = registry.get_case(name)

    @functools.wraps(case.builder)                   # its parameters stay the case's
    def refuse(**_):
        raise AssertionError("the builder ran for a restart from a state")
    monkeypatch.setitem(registry.CASES, name, dataclasses.replace(case, builder=refuse))
    fresh = vortexsim.from_config(config, state=state)
    assert fresh.case_files == {}
    fresh.pickup(state)
    fresh.run(steps=2)
    a, b = again.state_dict(), fresh.state_dict()
    assert (a["t"], a["iteration"], a["dt"]) == (b["t"], b["iteration"], b["dt"])
    for key in ("x", "alpha", "sigma", "volume", "group"):
        assert np.array_equal(a["elements"][key], b["elements"][key],
                              equal_nan=key == "volume"), key       # NaN: not known
    assert a["groups"] == b["groups"]
    # a state without volumes and groups (snapshot formats 1 and 2) still builds the case
    old = {**state, "elements": {k: state["elements"][k] for k in ("x", "alpha", "sigma")}}
    with pytest.raises(AssertionError, match="builder ran"):
        vortexsim.from_config(config, state=old)
