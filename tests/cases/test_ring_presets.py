"""The ring cases' GPU presets at a CPU size: they start on the remeshing lattice, the
memory estimate bounds the element count that remeshing makes, and a few steps of each run
with its viscous term, remeshing and adaptive step, carrying the health measures."""
import os

import numpy as np
import pytest

import vortexsim
from vortexsim.cli.resources import problem_size
from vortexsim.config import load_case_file, load_presets

RINGS = ("leapfrog", "collision", "ring_ground", "oblique_collision")
CASE_FILES = os.path.join(os.path.dirname(vortexsim.__file__), "case_files")
#: the CPU size: the presets' options on a coarse lattice and a coarse ring
SMALL = dict(n_phi=24, layers=2, layer_spacing=1.0, sigma="auto", tracers_per_ring=4,
             remesh_spacing=0.25, method="direct", device="cpu", progress=False)


def _preset(case):
    path = os.path.join(CASE_FILES, f"{case}.toml")
    _, params = load_case_file(path)
    params.update(load_presets(path)["gpu"])
    params.update(SMALL)
    return {k: v for k, v in params.items()
            if k not in ("snapshot_interval", "diagnostics_interval", "plot") and v != "auto"}


@pytest.mark.parametrize("case", RINGS)
def test_presets_remesh_viscous_and_adapt(case):
    params = _preset(case)
    assert params["remesh_every"] > 0 and params["viscous"] == "pse" and params["nu"] > 0
    assert params["adaptive"] is True and params["courant"] <= 0.5


@pytest.mark.parametrize("case", RINGS)
def test_a_preset_starts_on_the_lattice_within_its_memory_estimate(case):
    params = _preset(case)
    sim = vortexsim.make_case(case, **params)
    el = sim.model.elements
    h = params["remesh_spacing"]
    x = el.x - np.array([0.0, 0.0, params.get("ground_z", 0.0)])
    np.testing.assert_allclose(x / h, np.round(x / h), atol=1e-9)    # on the nodes
    np.testing.assert_array_equal(el.volume, h ** 3)
    n_estimated, _, _ = problem_size({"case": case, **params})
    assert len(el) <= n_estimated
    if case == "ring_ground":
        assert float(el.x[:, 2].min()) >= params.get("ground_z", 0.0)


@pytest.mark.parametrize("case", RINGS)
def test_a_preset_steps_with_its_health_on_every_row(case):
    sim = vortexsim.make_case(case, **_preset(case))
    first = sim.diagnostics()
    sim.run(steps=2)
    row = sim.diagnostics()
    courant = sim.model.parameters["courant"]
    for r in (first, row):
        assert 0 < r["spacing_max"] <= 2.0
        assert np.all(np.asarray(r["ring_escaped"]) >= 0)
    # the first step's dt is courant / max|grad u| of the initial field (or dt_max);
    # a later step's strain is courant times the growth of max|grad u| over one step
    assert 0 < first["step_strain"] <= courant * (1 + 1e-12)
    assert 0 < row["step_strain"] <= 1.1 * courant
    assert sim.model.iteration == 2
