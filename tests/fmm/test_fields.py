"""The diagnostics' fields in O(N + M) (vortexsim.fmm.fields) against the all-pairs sums.

E = ½ Σ α·ψ, Ω₂ = Σ α·ω and H = Σ α·u from :meth:`FMM.fields` must match the direct
double sums of :mod:`vortexsim.diagnostics` (and u the direct velocity) to 1e-6 relative
in float64, with the far field in play (trees of depth ≥ 2), for every kernel that has
them, on a uniform cloud, on rings and on a ring over a ground plane (images as sources).
(Winckelmans runs the algebraic code path with other constants: it is checked on rings
only, as its CPU far field at P = 18 costs seconds per M2L.)
"""
import numpy as np
import pytest

from vortexsim import diagnostics as D
from vortexsim.diagnostics import row as S
from vortexsim.cases.registry import make_case
from vortexsim.fmm import fields as F
from vortexsim.fmm.evaluator import FMM
from vortexsim.fmm.near import NearField
from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import direct_sum_numpy

REL = 1e-6


@pytest.fixture
def depths(monkeypatch):
    """The leaf levels of the fields' trees, to check that the far field ran."""
    seen = []
    build = F.build_tree

    def spy(*args, **kwargs):
        seen.append(args[2])
        return build(*args, **kwargs)
    monkeypatch.setattr(F, "build_tree", spy)
    return seen


def _cloud(n, sigma, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 3)) * 2.0
    alpha = rng.standard_normal((n, 3)) * 1e-3
    return x, alpha, np.broadcast_to(np.asarray(sigma, dtype=float), (n,)).copy()


@pytest.mark.parametrize("kernel, sigma", [
    ("gaussian", "mixed"), ("algebraic", 0.04), ("singular", 0.04), ("polynomial", "mixed")])
def test_fields_match_the_double_sums_on_a_cloud(kernel, sigma, depths):
    n = 600
    rng = np.random.default_rng(1)
    sig = 0.02 + 0.03 * rng.random(n) if sigma == "mixed" else sigma
    x, alpha, sig = _cloud(n, sig)
    fmm = FMM(kernel, tol=1e-6, device="cpu", leaf_size=10)
    f = fmm.fields(x, alpha, sig)
    assert depths and depths[-1] >= 2
    energy, enstrophy, helicity = D.field_sums(alpha, f)
    e_ref, w_ref = D.energy_and_enstrophy(x, alpha, sig, kernel)
    assert float(energy) == pytest.approx(float(e_ref), rel=REL)
    if get_kernel(kernel).zeta is None:
        assert f.omega is None and np.isnan(float(enstrophy))
    else:
        assert float(enstrophy) == pytest.approx(float(w_ref), rel=REL)
    u_ref, _ = direct_sum_numpy(get_kernel(kernel), x, alpha, sig, x, gradient=False)
    assert np.linalg.norm(f.u - u_ref) <= REL * np.linalg.norm(u_ref)
    scale = float(np.abs(alpha * u_ref).sum())
    assert abs(float(helicity) - float((alpha * u_ref).sum())) <= REL * scale


@pytest.mark.parametrize("kernel", ["gaussian", "singular", "polynomial"])
def test_symmetric_shares_sum_to_the_fields_sums(kernel, depths, monkeypatch):
    """The symmetric pass (half the stencil, twice the forward leaves) meets each near
    pair of leaves once, and its shares sum to the fields' E, Ω₂, H to rounding."""
    x, alpha, sig = _cloud(700, 0.04)
    fmm = FMM(kernel, tol=1e-6, device="cpu", leaf_size=10)
    met = []
    fields = NearField.fields

    def spy(self, tree, xs, *args, **kwargs):
        met.append(kwargs.get("symmetric"))
        return fields(self, tree, xs, *args, **kwargs)
    monkeypatch.setattr(NearField, "fields", spy)
    full = D.field_sums(alpha, fmm.fields(x, alpha, sig))
    shares = D.field_sums(alpha, fmm.fields(x, alpha, sig, symmetric=True))
    assert met == [False, True] and depths[-1] >= 2
    for a, b in zip(full, shares):
        if get_kernel(kernel).zeta is None and np.isnan(float(a)):
            assert np.isnan(float(b))
            continue
        assert float(b) == pytest.approx(float(a), rel=1e-12)
    # cores of several sizes: the fields themselves (u of a pair depends on its source's σ)
    mixed = np.linspace(0.03, 0.05, len(sig))
    fmm.fields(x, alpha, mixed, symmetric=True)
    assert met[-1] is False
    with pytest.raises(ValueError, match="sources as the targets"):
        fmm.fields(x, alpha, sig, x, symmetric=True)


def test_fields_at_other_targets_with_their_own_cores(depths):
    """Targets that are not the sources (the ground plane's case): σ_pq from both."""
    x, alpha, sig = _cloud(900, 0.03)
    y, beta, tsig = _cloud(300, 0.05, seed=3)
    f = FMM("gaussian", tol=1e-6, device="cpu", leaf_size=16).fields(x, alpha, sig, y, tsig)
    assert depths[-1] >= 2
    e_ref, w_ref = D.energy_and_enstrophy(y, beta, tsig, "gaussian", sources=(x, alpha, sig))
    assert 0.5 * float((beta * f.psi).sum()) == pytest.approx(float(e_ref), rel=REL)
    assert float((beta * f.omega).sum()) == pytest.approx(float(w_ref), rel=REL)


@pytest.mark.parametrize("case, kernel", [("leapfrog", "gaussian"), ("ring_ground", "gaussian"),
                                          ("leapfrog", "winckelmans")])
def test_simulation_diagnostics_fast_equals_direct(case, kernel, depths, monkeypatch):
    sim = make_case(case, device="cpu", progress=False, n_phi=48, layers=2, kernel=kernel,
                    method="fmm")
    sim.summation.fmm.leaf_size = 12              # a tree deep enough for a far field
    monkeypatch.setattr(S, "DIRECT_DIAGNOSTICS_PAIRS", {"cpu": 0})
    fast = sim.diagnostics()
    assert depths and depths[-1] >= 2
    monkeypatch.setattr(S, "DIRECT_DIAGNOSTICS_PAIRS", {"cpu": 1 << 60})
    ref = sim.diagnostics()
    assert fast["energy"] == pytest.approx(ref["energy"], rel=REL)
    assert fast["enstrophy"] == pytest.approx(ref["enstrophy"], rel=REL)
    el = sim.elements
    scale = float(np.abs(el.alpha * sim.velocity()[0]).sum())
    assert abs(fast["helicity"] - ref["helicity"]) <= REL * scale


def test_field_reach_holds_the_gaussian_factors_to_tol():
    """Beyond the reach the pair factors equal the far field's to tol/10: g relative, ζ
    relative to its peak."""
    from vortexsim.kernels.cutoff import blob_pair_factors
    for tol in (1e-3, 1e-6, 1e-9):
        r = F.field_reach("gaussian", tol, 1.0)
        e, z = blob_pair_factors("gaussian", np.array([r * r]), np.array([1.0]))
        assert abs(e[0] * r - 1.0) < tol / 10
        assert z[0] / blob_pair_factors("gaussian", np.array([0.0]), np.array([1.0]))[1][0] \
            <= tol / 10 * (1 + 1e-12)


def test_algebraic_fields_need_one_sigma():
    x, alpha, _ = _cloud(50, 0.05)
    sig = np.linspace(0.04, 0.06, 50)
    with pytest.raises(ValueError, match="uniform sigma"):
        FMM("algebraic", device="cpu").fields(x, alpha, sig)


def test_diagnostics_of_an_algebraic_kernel_with_several_cores_fall_back_to_the_sums(
        monkeypatch, caplog):
    """The fields pass refuses cores of several sizes for the algebraic kernels
    (CoresNotUniform); the diagnostics then take the direct double sums, and say so once."""
    from vortexsim import Simulation
    x, alpha, _ = _cloud(200, 0.05)
    sigma = np.linspace(0.04, 0.06, 200)
    sim = Simulation((x, alpha, sigma), dt=0.1, device="cpu", progress=False,
                     kernel="algebraic")
    monkeypatch.setattr(S, "DIRECT_DIAGNOSTICS_PAIRS", {"cpu": 0})
    with caplog.at_level("WARNING"):
        first, second = sim.diagnostics(), sim.diagnostics()
    assert sum("direct double sums" in r.message for r in caplog.records) == 1
    e_ref, w_ref = D.energy_and_enstrophy(x, alpha, sigma, "algebraic")
    assert first["energy"] == second["energy"] == pytest.approx(float(e_ref), rel=1e-12)
    assert first["enstrophy"] == pytest.approx(float(w_ref), rel=1e-12)
