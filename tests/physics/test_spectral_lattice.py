"""The spectral sum at the lattice nodes by plain FFTs (vortexsim.summation.lattice): the
same series as the non-uniform FFTs (vortexsim.summation.spectral) to their precision, odd and even
n, the nodes' own blobs out; the time stepper's first stage on the lattice."""
import math

import numpy as np
import pytest

from vortexsim.summation.lattice import LatticeSum
from vortexsim.summation.spectral import SpectralSum

L = 2.0 * math.pi


def _lattice(n, seed=0):
    h = L / n
    g = np.arange(n) * h
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    alpha = np.random.default_rng(seed).standard_normal((n ** 3, 3)) * h ** 3
    return x, alpha - alpha.mean(axis=0), h


@pytest.mark.parametrize("n, overlap, order", [(8, 1.0, 2), (9, 1.0, 2), (10, 1.5, 2),
                                               (8, 1.0, 6)])
def test_equals_the_nufft_series(n, overlap, order):
    """At tol 1e-10 both evaluate the same cube of modes; the non-uniform FFTs' precision
    tol/10 bounds the difference (measured 1e-11..1e-12); also for gaussian6 blobs."""
    x, alpha, h = _lattice(n)
    spectral = SpectralSum(L, overlap * h, tol=1e-10, order=order)
    u0, g0 = spectral.evaluate(x, alpha)
    u1, g1 = LatticeSum(spectral, n).evaluate(alpha)
    assert np.abs(u1 - u0).max() <= 1e-10 * np.abs(u0).max()
    assert np.abs(g1 - g0).max() <= 1e-10 * np.abs(g0).max()
    u2, g2 = LatticeSum(spectral, n).evaluate(alpha, gradient=False)
    assert g2 is None and np.array_equal(u2, u1)


@pytest.mark.parametrize("n, overlap, order", [(8, 1.0, 2), (9, 1.0, 2), (10, 1.5, 2),
                                               (8, 1.0, 6)])
def test_field_sums_equal_the_nufft_sums(n, overlap, order):
    """The seven quadratic sums of the diagnostics, on a random field with a divergent
    part (so that the kinetic energy differs from E and every folded weight counts):
    measured 1e-12..2e-11 apart at tol 1e-10."""
    x, alpha, h = _lattice(n)
    spectral = SpectralSum(L, overlap * h, tol=1e-10, order=order)
    ref = spectral.field_sums(x, alpha)
    got = LatticeSum(spectral, n).field_sums(alpha)
    assert set(got) == set(ref)
    assert ref["kinetic_energy"] < 0.9 * ref["energy"]
    for key, value in ref.items():
        assert got[key] == pytest.approx(value, rel=1e-10), key


def test_errors():
    _, alpha, h = _lattice(8)
    s = LatticeSum(SpectralSum(L, h, tol=1e-6), 8)
    with pytest.raises(ValueError, match=r"shape \(512, 3\)"):
        s.evaluate(alpha[:100])


def test_the_stepper_sums_the_lattice_stage_by_ffts():
    """A periodic run remeshed every step takes the FFT path at the first stage of every
    step after the first (the count of non-uniform sums drops), and its state and its
    diagnostics row follow the run without it to the non-uniform FFTs' precision."""
    import vortexsim

    def run(disable):
        sim = vortexsim.make_case("taylor_green", n=12, nu=0.0, dt=0.2, tol=1e-10,
                                  method="spectral", device="cpu", progress=False)
        if disable:
            sim.model.on_lattice = lambda: None
        calls = []
        ev = sim.summation.spectral_sum(None, sim.sigma_range)
        orig = type(ev).evaluate
        type(ev).evaluate = lambda self, *a, **k: (calls.append(1), orig(self, *a, **k))[1]
        try:
            for _ in range(4):
                sim.step()
        finally:
            type(ev).evaluate = orig
        return sim, len(calls)

    fast, n_fast = run(False)
    slow, n_slow = run(True)
    assert (n_fast, n_slow) == (5, 8)                       # 3 of 4 first stages on the lattice
    rows = fast.diagnostics(), slow.diagnostics()           # from the lattice / the NUFFT
    for key in ("energy", "enstrophy", "mean_energy", "dissipation", "particle_energy"):
        assert rows[0][key] == pytest.approx(rows[1][key], rel=1e-9), key
    scale = np.abs(slow.elements.alpha).max()
    assert np.abs(fast.elements.alpha - slow.elements.alpha).max() <= 1e-11 * scale   # 7.7e-13
    np.testing.assert_array_equal(fast.elements.x, slow.elements.x)


@pytest.mark.gpu
def test_cupy_matches_numpy():
    import cupy as cp
    n = 16
    _, alpha, h = _lattice(n)
    spectral = SpectralSum(L, h, tol=1e-8)
    cpu, gpu = LatticeSum(spectral, n), LatticeSum(spectral, n, cp)
    u0, g0 = cpu.evaluate(alpha)
    u1, g1 = gpu.evaluate(cp.asarray(alpha))
    ref, got = cpu.field_sums(alpha), gpu.field_sums(cp.asarray(alpha))
    for key, value in ref.items():
        assert got[key] == pytest.approx(value, rel=1e-12), key
    np.testing.assert_allclose(cp.asnumpy(u1), u0, atol=1e-13 * np.abs(u0).max())
    np.testing.assert_allclose(cp.asnumpy(g1), g0, atol=1e-13 * np.abs(g0).max())
