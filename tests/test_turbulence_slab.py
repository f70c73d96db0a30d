"""vortexsim/diagnostics/turbulence.py: slab_vorticity_statistics, the statistics of the
lattice vorticity split into x-slabs over ranks (threads playing ranks), against the
one-process vorticity_statistics of the whole field: every key to 1e-12 relative, the
spectrum to 1e-12 of its maximum, the same bits on every rank, the inf/NaN pattern of
ν = 0 and of fields with no gradient; n = 8, 9, 12 on 1, 2 and 3 ranks (slabs of equal
and unequal width).  CPU, a few seconds; one comparison on CuPy (2 ranks)."""
import math

import numpy as np
import pytest
from thread_ranks import on_ranks  # tests/thread_ranks.py

from vortexsim.backend import SingleProcess
from vortexsim.diagnostics.random_field import random_solenoidal_field
from vortexsim.diagnostics.turbulence import slab_vorticity_statistics, vorticity_statistics
from vortexsim.geometry.slab import SlabFFT

BOX = 3.0


def on_slabs(omega, size, nu, xp=np, box=BOX):
    """[slab_vorticity_statistics of rank r] for the whole field ``omega`` (n, n, n, 3)
    (host) split over ``size`` thread ranks (SingleProcess for one), the slabs in ``xp``."""
    n = omega.shape[0]

    def work(comm):
        fft = SlabFFT(n, comm, xp)
        i0, i1 = fft.x_planes
        slab = xp.asarray(np.ascontiguousarray(omega[i0:i1].transpose(3, 0, 1, 2)))
        return slab_vorticity_statistics(slab, fft, box, nu)
    if size == 1:
        return [work(SingleProcess())]
    return on_ranks(size, work)


def field(kind, n, seed):
    """A vorticity (n, n, n, 3): ``"solenoidal"`` (band-limited, zero mean) or
    ``"noise"`` (white noise with a mean: every mode, the Nyquist planes included)."""
    if kind == "solenoidal":
        return random_solenoidal_field(n, BOX, energy=0.7, seed=seed)
    return np.random.default_rng(seed).standard_normal((n, n, n, 3)) + 0.2


def assert_same_pattern_and_close(stats, ref):
    """The same keys; inf and NaN where ``ref`` has them; else within 1e-12 relative
    (1e-14 absolute for values near zero, e.g. divergence_rms)."""
    assert list(stats) == list(ref)
    for key, value in ref.items():
        got = stats[key]
        assert isinstance(got, float), key
        if math.isnan(value) or math.isinf(value):
            assert repr(got) == repr(value), (key, got, value)
        else:
            assert got == pytest.approx(value, rel=1e-12, abs=1e-14), key


def assert_matches_one_process(results, omega, nu):
    """Every rank's (stats, k, E) equals vorticity_statistics of the whole field, and
    all ranks have the same bits."""
    ref, k_ref, e_ref = vorticity_statistics(omega, BOX, nu)
    stats, k, e = results[0]
    assert_same_pattern_and_close(stats, ref)
    assert isinstance(k, np.ndarray) and isinstance(e, np.ndarray)
    assert k.shape == k_ref.shape == e.shape == e_ref.shape
    np.testing.assert_array_equal(k, k_ref)
    assert np.abs(e - e_ref).max() <= 1e-12 * np.abs(e_ref).max()
    for other, o_k, o_e in results[1:]:                   # the same bits on every rank
        assert [repr(v) for v in other.values()] == [repr(v) for v in stats.values()]
        assert list(other) == list(stats)
        assert o_k.tobytes() == k.tobytes() and o_e.tobytes() == e.tobytes()


@pytest.mark.parametrize("kind", ["solenoidal", "noise"])
@pytest.mark.parametrize("size", [1, 2, 3])
@pytest.mark.parametrize("n", [8, 9, 12])
def test_slab_statistics_are_the_one_process_statistics(n, size, kind):
    omega = field(kind, n, seed=10 * n + size)
    assert_matches_one_process(on_slabs(omega, size, 0.013), omega, 0.013)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_zero_viscosity_and_fields_without_gradient(size):
    """ν = 0: ε = 0, λ, Re_λ, η and k_max η inf, as on one process; the curl of a
    shear wave (u = (sin 2k₀y, 0, 0): no longitudinal gradient) has NaN skewness and
    flatness; a zero field also a NaN integral scale."""
    n = 9
    omega = field("noise", n, seed=5)
    results = on_slabs(omega, size, 0.0)
    assert_matches_one_process(results, omega, 0.0)
    stats = results[0][0]
    assert stats["dissipation"] == 0.0
    assert all(math.isinf(stats[key]) for key in ("taylor_scale", "re_lambda",
                                                  "kolmogorov_eta", "k_max_eta"))
    # ω = ∇ × (A sin(2k₀y), 0, 0) = (0, 0, −2k₀A cos(2k₀y))
    k = 2 * 2 * math.pi / BOX
    shear = np.zeros((n, n, n, 3))
    shear[..., 2] = -k * 1.3 * np.cos(k * np.arange(n) * BOX / n)[None, :, None]
    for nu in (0.0, 0.02):
        results = on_slabs(shear, size, nu)
        assert_matches_one_process(results, shear, nu)
        assert math.isnan(results[0][0]["skewness"]) and math.isnan(results[0][0]["flatness"])
    zero = np.zeros((n, n, n, 3))
    results = on_slabs(zero, size, 0.0)
    assert_matches_one_process(results, zero, 0.0)
    assert math.isnan(results[0][0]["integral_scale"])


def test_errors_are_raised_on_every_rank_together():
    """A non-finite value on one rank's slab: ValueError on every rank (after the one
    exchange, no rank left waiting); a wrong shape or namespace: at once."""
    n = 8
    omega = field("noise", n, seed=1)

    def work(comm):
        fft = SlabFFT(n, comm, np)
        i0, i1 = fft.x_planes
        slab = np.ascontiguousarray(omega[i0:i1].transpose(3, 0, 1, 2))
        if comm.rank == 1:
            slab[2, 0, 3, 1] = np.nan
        with pytest.raises(ValueError, match=r"non-finite .* rank\(s\) \[1\]"):
            slab_vorticity_statistics(slab, fft, BOX, 0.01)
        return True
    assert on_ranks(2, work) == [True, True]
    fft = SlabFFT(n, SingleProcess(), np)
    with pytest.raises(ValueError, match="omega has shape"):
        slab_vorticity_statistics(omega, fft, BOX, 0.01)              # component last
    with pytest.raises(TypeError, match="real"):
        slab_vorticity_statistics(omega.transpose(3, 0, 1, 2).astype(complex), fft, BOX,
                                  0.01)
    with pytest.raises(ValueError, match="nu"):
        slab_vorticity_statistics(omega.transpose(3, 0, 1, 2), fft, BOX, -1.0)
    with pytest.raises(ValueError, match="box"):
        slab_vorticity_statistics(omega.transpose(3, 0, 1, 2), fft, 0.0, 0.01)


@pytest.mark.gpu
def test_cupy_slabs_match_numpy():
    """CuPy slabs on 2 thread ranks (n = 9: unequal slabs, odd lattice): the statistics
    of one process to 1e-12, the spectrum (the shell-sum kernel with each rank's table)
    to 1e-12 of its maximum, the same bits on both ranks."""
    cp = pytest.importorskip("cupy")
    n, nu = 9, 0.013
    omega = field("noise", n, seed=3)
    results = on_slabs(omega, 2, nu, xp=cp)
    host = [(s, cp.asnumpy(k), cp.asnumpy(e)) for s, k, e in results]
    assert_matches_one_process(host, omega, nu)
    ref, _, e_ref = vorticity_statistics(cp.asarray(omega), BOX, nu)
    assert_same_pattern_and_close(host[0][0], ref)
    e_ref = cp.asnumpy(e_ref)
    assert np.abs(host[0][2] - e_ref).max() <= 1e-12 * np.abs(e_ref).max()
