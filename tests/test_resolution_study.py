"""vortexsim.validation.resolution_study (issue 15) and its event helpers (ring_events):
the extraction on synthetic series with known answers, the levels, and the pipeline in
``--quick`` mode on one case (CPU, a few seconds)."""
import json
import math

import numpy as np
import pytest

from vortexsim.validation import ring_events as _rings
from vortexsim.validation import resolution_study as rs


def test_crossing_times_of_linear_centres():
    """Rear centre z = 0.3 t, front z = 1 + 0.1 t: they meet at t = 5 (and only there)."""
    t = np.arange(0.0, 10.01, 0.2)
    gap = (1 + 0.1 * t) - 0.3 * t
    assert _rings.crossing_times(t, gap) == [pytest.approx(5.0, abs=1e-12)]
    # a row exactly at the crossing counts once; two passes come back in order
    t2 = np.arange(0.0, 10.01, 0.5)
    assert _rings.crossing_times(t2, 5.0 - t2) == [pytest.approx(5.0)]
    passes = _rings.crossing_times(t, np.cos(t))
    assert passes == pytest.approx([math.pi / 2, 3 * math.pi / 2, 5 * math.pi / 2], abs=2e-3)


def test_extremum_of_a_parabola_and_a_monotone_approach():
    """h = 0.2 + 0.5 (t − 3.37)²: minimum 0.2 at 3.37 (rows 0.1 apart, vertex between them);
    a monotone h has its minimum at the end: not reached."""
    t = np.arange(0.0, 8.0001, 0.1)
    t_min, h_min, reached = _rings.extremum(t, 0.2 + 0.5 * (t - 3.37) ** 2, "min")
    assert reached and t_min == pytest.approx(3.37, abs=1e-10) and h_min == pytest.approx(0.2)
    t_max, y_max, reached = _rings.extremum(t, 1.3 - (t - 6.21) ** 2, "max")
    assert reached and t_max == pytest.approx(6.21, abs=1e-10) and y_max == pytest.approx(1.3)
    t_end, h_end, reached = _rings.extremum(t, 1.5 * np.exp(-0.2 * t), "min")
    assert not reached and t_end == 8.0 and h_end == pytest.approx(1.5 * math.exp(-1.6))
    assert _rings.value_range(t, np.sin(t)) == pytest.approx((-1.0, 1.0), abs=1e-4)


def test_first_crossing_of_an_approach():
    """h = 1.5 − 0.2 t falls to 0.5 at t = 5; never to −1."""
    t = np.arange(0.0, 10.0001, 0.05)
    h = 1.5 - 0.2 * t
    assert _rings.first_crossing(t, h, 0.5) == pytest.approx(5.0, abs=1e-12)
    assert _rings.first_crossing(t, h, -1.0) is None


def test_quantities_of_synthetic_rings():
    """The study's quantities from synthetic rows: leapfrog passes and radius ranges, and
    the head-on collision's approach (mirror rings)."""
    t = np.arange(0.0, 10.0001, 0.1)
    centres = np.zeros((len(t), 2, 3))
    centres[:, 0, 2], centres[:, 1, 2] = 0.3 * t, 1 + 0.1 * t
    radii = np.stack([1 - 0.1 * np.sin(t), 1 + 0.1 * np.sin(t)], axis=1)
    q = rs.quantities("leapfrog", t, centres, radii, ["rear", "front"], {"radius": 1.0})
    assert q["pass_times"] == [pytest.approx(5.0)]
    assert (q["rear_radius_min"], q["rear_radius_max"]) == pytest.approx((0.9, 1.1), abs=1e-5)
    h = 0.2 + 0.5 * (t - 3.37) ** 2
    centres[:, 0, 2], centres[:, 1, 2] = h, -h
    q = rs.quantities("collision", t, centres, radii, ["upper", "lower"], {"radius": 1.0})
    assert q["reached"] and q["t_min"] == pytest.approx(3.37) and q["h_min"] == pytest.approx(0.2)
    for level, root in ((0.5, math.sqrt(0.6)), (0.25, math.sqrt(0.1))):
        # linear between rows: error below Δt²/8 · |h''/h'| = 0.1²/8 / root
        assert q[f"t_h{level:g}"] == pytest.approx(3.37 - root, abs=0.01 / 8 / root)
    assert q["radius_final"] == pytest.approx(radii[-1, 0])
    s = rs.spread({"a": 1.0, "p": [2.0, 3.0], "b": None}, {"a": 0.9, "p": [2.1]})
    assert s["a"]["abs"] == pytest.approx(0.1) and s["a"]["rel"] == pytest.approx(0.1)
    assert s["p"][0]["abs"] == pytest.approx(0.1) and s["p_count"] == {"fine": 2, "medium": 1}


def test_levels_coarsen_every_spacing_of_the_gpu_preset():
    """fine is the preset; medium and coarse scale σ, Δ and 2πR/n_phi by √2 and 2."""
    preset = {"n_phi": 129, "layers": 7, "layer_spacing": 0.5, "sigma": 0.05}
    assert rs.coarsened(preset, 1.0) == preset
    c = math.sqrt(2)
    assert rs.coarsened(preset, c) == pytest.approx(
        {"n_phi": 91, "layers": 5, "layer_spacing": 0.5 * c, "sigma": 0.05 * c})
    assert rs.coarsened(preset, 2.0) == {"n_phi": 65, "layers": 4, "layer_spacing": 1.0,
                                         "sigma": 0.1}
    assert rs.element_count(2, 129, 7, 0.1) == 32766


def test_lattice_levels_represent_the_presets_effective_core():
    """--lattice: every level's core makes √(m₂ + h²) the preset's (medium keeps the case's
    σ_c = 0.1); a physical --set reaches every lattice level; a blob wider than the
    effective core is refused."""
    for case in ("leapfrog", "oblique_collision"):
        runs = rs.plan(rs.parse_args(["--lattice", "--cases", case, "--set", "nu=1e-4",
                                      "--levels", "coarse", "medium", "fine"]))
        by = {r["level"]: r for r in runs}
        target = by["medium"]["info"]["sigma_eff_represented"]
        assert by["medium"]["params"]["core"] == pytest.approx(0.1, rel=1e-14)
        for level in ("coarse", "fine"):
            info = by[level]["info"]
            assert info["sigma_eff_represented"] == pytest.approx(target, rel=1e-13)
            assert info["sigma"] == pytest.approx(info["remesh_spacing"], rel=1e-14)
            assert by[level]["params"]["nu"] == 1e-4
        assert by["coarse"]["params"]["core"] < 0.1 < by["fine"]["params"]["core"]
        # the initial rings' element spacings follow h: stations and layers finer
        assert by["coarse"]["params"]["n_phi"] < 129 < by["fine"]["params"]["n_phi"]
        assert by["fine"]["params"]["sigma"] == pytest.approx(
            0.05 * by["fine"]["info"]["remesh_spacing"] / by["medium"]["info"]["remesh_spacing"])
    target = math.hypot(rs.represented_core(0.1, 7, 0.5), 0.05)
    assert rs.lattice_core(target, 7, 0.5, 0.05) == pytest.approx(0.1, rel=1e-14)
    core = rs.lattice_core(target, 11, 0.315, 0.03)
    assert math.hypot(rs.represented_core(core, 11, 0.315), 0.03) == \
        pytest.approx(target, rel=1e-14)
    with pytest.raises(ValueError, match="at least as wide as the effective core"):
        rs.lattice_core(target, 7, 0.5, 0.2)


def test_quick_pipeline_on_one_case(tmp_path):
    """--quick on ring_ground (CPU, a few seconds): every level ran, the JSON and the
    Markdown table hold the quantities and the spread."""
    out = tmp_path / "rs.json"
    rs.main(["--quick", "--device", "cpu", "--cases", "ring_ground", "--out", str(out)])
    doc = json.loads(out.read_text())
    entry = doc["cases"]["ring_ground"]
    assert set(entry["runs"]) == {"coarse", "medium", "fine", "default"}
    for level, r in entry["runs"].items():
        assert r["complete"], level
        assert {"n_elements", "sigma", "sigma_eff", "quantities", "series", "drift"} <= set(r)
        assert set(r["quantities"]) >= {"t_min", "h_min", "reached", "t_h0.5", "t_h0.25",
                                        "h_final", "radius_final"}
        assert r["sigma_eff"] == pytest.approx(math.hypot(0.1, r["sigma"]))
        assert r["series"]["t"][-1] == pytest.approx(r["t_end"])
    assert entry["runs"]["default"]["method"] == "direct"
    assert entry["runs"]["fine"]["method"] == "fmm"
    assert {"h_final", "radius_final"} <= set(entry["spread_fine_medium"])
    md = out.with_suffix(".md").read_text()
    assert "| spread fine–medium |" in md and "| default |" in md


def test_bridge_circulation_of_straight_tubes():
    """A tube along x through the plane x = 0 at y > 0 carries Γ through the half-plane
    y > 0: the bridge measure |F− − F+|/2 is Γ/2 for one such tube and Γ for the pair of
    opposite tubes that reconnected rings form; a ring away from the plane gives only its
    Gaussian tails' flux."""
    from vortexsim.cases.rings import vortex_ring
    n, length = 4000, 40.0
    s = np.linspace(-length / 2, length / 2, n, endpoint=False)
    upper = np.stack([s, np.full(n, 0.5), np.zeros(n)], axis=1)
    alpha = np.zeros_like(upper)
    alpha[:, 0] = 1.0 * length / n                           # Γ = 1
    assert _rings.bridge_circulation(upper, alpha, 0.1) == pytest.approx(0.5, rel=1e-6)
    lower = upper * [1.0, -1.0, 1.0]
    pair = _rings.bridge_circulation(np.vstack([upper, lower]), np.vstack([-alpha, alpha]),
                                     0.1)
    assert pair == pytest.approx(1.0, rel=1e-6)
    x, a, sigma = vortex_ring(centre=(-3.0, 0.0, 0.0), core=0.0, n_phi=64)
    assert _rings.bridge_circulation(x, a, sigma) < 1e-12


def test_quick_lattice_pipeline_records_the_bridge_of_the_oblique_collision(tmp_path):
    """--quick --lattice on oblique_collision (CPU, one coarse level, two rows): the bridge
    series is recorded with every row, within [0, 1], and its quantities are reported."""
    out = tmp_path / "rs.json"
    rs.main(["--quick", "--lattice", "--device", "cpu", "--cases", "oblique_collision",
             "--levels", "coarse", "--t-end", "0.1", "--diag-interval", "0.05",
             "--no-energy", "--out", str(out)])
    run = json.loads(out.read_text())["cases"]["oblique_collision"]["runs"]["coarse"]
    assert run["complete"] and run["remesh_spacing"] == pytest.approx(
        0.04 * 5 * 2 ** (1 / 3))
    bridge = np.asarray(run["series"]["bridge"])
    assert bridge.shape == np.asarray(run["series"]["t"]).shape
    assert np.all((bridge >= 0) & (bridge <= 1))
    assert set(run["quantities"]) >= {"t_bridge0.1", "t_bridge0.5", "bridge_final",
                                      "left_radius_final", "right_radius_final"}
    assert "t(bridge = 0.5 Γ)" in out.with_suffix(".md").read_text()
