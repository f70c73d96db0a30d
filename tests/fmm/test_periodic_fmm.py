"""The periodic FMM (``FMM.evaluate(..., box=L)``) against the spectral sum of the box.

The spectral sum (:mod:`vortexsim.summation.spectral`) is exact to its tolerance for Gaussian
blobs of one σ; it is run at tol 1e-10 as the reference.  The element counts are the
smallest cubes N = n³ ≥ 2000 whose near-field reach σ ρ*(tol) still fits half the box
(the periodic FMM's limit with the CPU's 5³ leaf stencil), with h = L / n.
"""
import numpy as np
import pytest

from vortexsim import induced_velocity
from vortexsim.fmm import expansions as E
from vortexsim.fmm.evaluator import FMM
from vortexsim.fmm.periodic import ghost_sources, ghost_tables, lattice_operator, tinfoil_shift
from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import direct_sum_numpy
from vortexsim.geometry import wrap
from vortexsim.summation.spectral import SpectralSum

L = 2.0
_FMMS = {}


def _fmm(tol, **kw):
    """One evaluator per setting for the whole module (its operators are cached)."""
    key = (tol, tuple(sorted(kw.items())))
    if key not in _FMMS:
        _FMMS[key] = FMM(kw.pop("kernel", "gaussian"), tol=tol, device="cpu", **kw)
    return _FMMS[key]


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _elements(rng, n, s, m=500):
    """n³ elements in [−0.3 L, 1.3 L)³ (outside the box too), Σα = 0 exactly in the
    mean and a non-zero linear impulse; σ = s h, h = L/n; m targets in [−L/2, 3L/2)³."""
    N = n ** 3
    x = rng.uniform(-0.3, 1.3, (N, 3)) * L
    alpha = rng.normal(size=(N, 3)) + np.array([1.0, 0.0, 0.0]) * np.sin(x[:, [1]])
    alpha -= alpha.mean(axis=0)
    impulse = 0.5 * np.cross(x, alpha).sum(axis=0)
    assert np.abs(impulse).max() > 1e-2 * np.abs(alpha).sum() / N
    y = rng.uniform(-0.5, 1.5, (m, 3)) * L
    return x, alpha, s * L / n, y


# smallest n (N = n³ ≥ 2000) with σ ρ*(tol) ≤ L/2: ρ* = 5.07 (1e-3), 6.39 (1e-6)
_CASES = [(1e-3, 1, 13), (1e-3, 2, 21), (1e-6, 1, 13), (1e-6, 2, 26)]


@pytest.mark.parametrize("tol, s, n", _CASES)
def test_matches_the_spectral_sum(rng, tol, s, n):
    """u within tol, ∇u within 10 tol (relative L2), sources ≠ targets, points outside
    the box, σ = h and 2h."""
    x, alpha, sigma, y = _elements(rng, n, s)
    u_ref, g_ref = SpectralSum(L, sigma, 1e-10).evaluate(x, alpha, y)
    fmm = _fmm(tol)
    u, g = fmm.evaluate(x, alpha, sigma, y, box=L)
    assert fmm.config.depth >= 2
    assert _rel(u, u_ref) <= tol
    assert _rel(g, g_ref) <= 10 * tol


def test_at_the_elements_leaves_out_only_the_own_pair(rng):
    """No targets: each element's own free-space pair is left out and its periodic
    images stay in (the spectral sum's convention), the ghost copies included."""
    x, alpha, sigma, _ = _elements(rng, 13, 1)
    u_ref, g_ref = SpectralSum(L, sigma, 1e-10).evaluate(x, alpha)
    u, g = _fmm(1e-6).evaluate(x, alpha, sigma, box=L)
    assert _rel(u, u_ref) <= 1e-6
    assert _rel(g, g_ref) <= 1e-5


def test_box_mean_is_zero_and_the_tinfoil_shift_is_what_is_removed(rng):
    """Over a 12³ lattice of the box u averages to the spectral sum's mean (its k = 0
    mode is absent); that mean differs from the cubic lattice sum by exactly the
    uniform field (1/3L³) Σ x × α, which is large here."""
    x, alpha, sigma, _ = _elements(rng, 13, 1)
    g = (np.arange(12) + 0.5) * L / 12
    y = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1).reshape(-1, 3)
    u_ref, _ = SpectralSum(L, sigma, 1e-10).evaluate(x, alpha, y, gradient=False)
    u, grad = _fmm(1e-3).evaluate(x, alpha, sigma, y, gradient=False, box=L)
    assert grad is None
    scale = np.sqrt((u_ref ** 2).sum(axis=1).mean())
    np.testing.assert_allclose(u.mean(axis=0), u_ref.mean(axis=0), atol=1e-3 * scale)
    shift = tinfoil_shift(wrap(x, L), alpha, L, np)
    assert np.abs(shift).max() > 10 * 1e-3 * scale          # the test would see it


def test_positions_are_wrapped(rng):
    """Shifting sources and targets by whole boxes changes nothing but round-off."""
    x, alpha, sigma, y = _elements(rng, 13, 1, m=100)
    fmm = _fmm(1e-3)
    u, g = fmm.evaluate(x, alpha, sigma, y, box=L)
    k = rng.integers(-3, 4, x.shape).astype(float)
    j = rng.integers(-3, 4, y.shape).astype(float)
    u2, g2 = fmm.evaluate(x + k * L, alpha, sigma, y + j * L, box=L)
    assert _rel(u2, u) <= 1e-12 and _rel(g2, g) <= 1e-12
    u3, _ = induced_velocity(x, alpha, sigma, y, method="fmm", box=L, tol=1e-3,
                             device="cpu")
    assert _rel(u3, u) <= 1e-12


def _images_difference(x, alpha, s1, s2, y, k1, k2):
    """Direct sums over the 27 nearest images of the box: kernel k1 with cores s1 minus
    kernel k2 with cores s2 (u, ∇u at y; exact for short-range differences)."""
    shifts = np.stack(np.meshgrid(*([-1.0, 0.0, 1.0],) * 3, indexing="ij"),
                      axis=-1).reshape(-1, 3) * L
    xi = (wrap(x, L)[None] + shifts[:, None]).reshape(-1, 3)
    ai = np.tile(alpha, (27, 1))
    u1, g1 = direct_sum_numpy(get_kernel(k1), xi, ai, np.tile(s1, 27), y)
    u2, g2 = direct_sum_numpy(get_kernel(k2), xi, ai, np.tile(s2, 27), y)
    return u1 - u2, g1 - g2


def test_a_3_stencil_evaluator_takes_the_5_stencil_where_the_box_needs_it(rng):
    """near_radius=1 (the GPU's default): a reach beyond a quarter box runs with the 5³
    leaf stencil (its own stages) instead of failing, to the same accuracy."""
    x, alpha, sigma, y = _elements(rng, 13, 1, m=200)
    fmm = FMM("gaussian", tol=1e-3, near_radius=1, device="cpu")
    u, g = fmm.evaluate(x, alpha, sigma, y, box=L)
    assert fmm.config.near_radius == 2 and fmm.near_radius == 1
    u_ref, g_ref = SpectralSum(L, sigma, 1e-10).evaluate(x, alpha, y)
    assert _rel(u, u_ref) <= 1e-3 and _rel(g, g_ref) <= 1e-2


@pytest.mark.parametrize("kernel", ["polynomial", "singular"])
def test_other_kernels_against_the_spectral_sum_plus_their_short_range_part(rng, kernel):
    """Kernels whose far field is 1/r differ from the Gaussian only within a few σ: the
    reference is the Gaussian spectral sum plus the difference of the two kernels'
    direct sums over the 27 nearest images (the difference decays as e^{−ρ²/2},
    negligible at the images' distance for σ = L/24)."""
    N, sigma = 1000, L / 24
    x = rng.uniform(-0.5, 1.5, (N, 3)) * L
    alpha = rng.normal(size=(N, 3))
    alpha -= alpha.mean(axis=0)
    y = rng.uniform(0.0, 1.0, (100, 3)) * L
    s = np.full(N, sigma)
    du, dg = _images_difference(x, alpha, s, s, y, kernel, "gaussian")
    u_spec, g_spec = SpectralSum(L, sigma, 1e-10).evaluate(x, alpha, y)
    u_ref, g_ref = u_spec + du, g_spec + dg
    u, g = _fmm(1e-3, kernel=kernel).evaluate(x, alpha, sigma, y, box=L)
    assert _rel(u, u_ref) <= 1e-3
    assert _rel(g, g_ref) <= 1e-2


def test_float32_at_tol_1e3(rng):
    x, alpha, sigma, y = _elements(rng, 13, 1, m=300)
    u_ref, g_ref = SpectralSum(L, sigma, 1e-10).evaluate(x, alpha, y)
    fmm = FMM("gaussian", tol=1e-3, precision="float32", device="cpu")
    u, g = fmm.evaluate(x, alpha, sigma, y, box=L)
    assert u.dtype == np.float32
    assert _rel(u, u_ref) <= 1e-3 and _rel(g, g_ref) <= 1e-2


def _image_sum(x, alpha, sigma, y, radius, inner=-1):
    """Direct Gaussian sum at y over the images of the unit box at offsets d with
    inner < max|d_i| ≤ radius."""
    d = np.stack(np.meshgrid(*(np.arange(-radius, radius + 1.0),) * 3, indexing="ij"),
                 axis=-1).reshape(-1, 3)
    d = d[np.abs(d).max(axis=1) > inner]
    xi = (x[None] + d[:, None]).reshape(-1, 3)
    return direct_sum_numpy(get_kernel("gaussian"), xi, np.tile(alpha, (len(d), 1)),
                            np.full(xi.shape[0], sigma), y)


def test_lattice_operator_on_a_dipole():
    """The far lattice alone, by hand: a source pair about the centre of the unit box.
    At targets near the centre, L2P of L̂ = T̂ M̂ (order 16, the wide separation's
    lattice: images beyond the 5³ block) plus the direct sum over the images with
    max|d| = 2 equals the periodic field (the spectral sum at 1e-13) minus the 27
    nearest images plus the tin-foil shift, to 1e-10 of itself."""
    box, sigma = 1.0, 0.1
    c = np.full(3, 0.5)
    x = c + np.array([[0.1, -0.2, 0.15], [-0.1, 0.2, -0.15]])
    alpha = np.array([[1.0, -0.5, 0.2], [-1.0, 0.5, -0.2]])
    y = c + np.array([[0.05, 0.02, -0.04], [-0.06, 0.03, 0.01], [0.0, -0.05, 0.05]])
    u_per, g_per = SpectralSum(box, sigma, 1e-13).evaluate(x, alpha, y)
    u27, g27 = _image_sum(x, alpha, sigma, y, 1)
    shift = tinfoil_shift(x, alpha, box, np)
    u_far, g_far = u_per - u27 + shift, g_per - g27
    P = 16
    U, V = E.harmonic_bases(P)
    M = E.p2m(x, alpha, c, P, np)                         # unit box: normalized = physical
    Lt = U @ (lattice_operator(P, separation=2) @ (V.T @ M))
    u, g = E.l2p(np.broadcast_to(Lt, (3,) + Lt.shape), y - c, P, np)
    u_ring, g_ring = _image_sum(x, alpha, sigma, y, 2, inner=1)
    np.testing.assert_allclose(u + u_ring, u_far, atol=1e-10 * np.abs(u_far).max())
    np.testing.assert_allclose(g + g_ring, g_far, atol=1e-10 * np.abs(g_far).max())
    # the lattice part is not negligible, nor its tin-foil shift
    assert np.abs(u).max() > 1e-2 * np.abs(u_far).max()
    assert np.abs(shift).max() > 1e-2 * np.abs(u_far).max()


def test_ghost_sources_copy_the_faces():
    """Depth 2, r = 1: the 6³ − 4³ ghost boxes hold copies of the wrapped leaves, shifted
    by whole boxes, and every stencil reaches 27 distinct extended boxes."""
    origin, shift, stencil = ghost_tables(2, 1)
    assert origin.shape == (6 ** 3 - 4 ** 3,) and stencil.shape == (64, 27)
    assert all(len(set(row)) == 27 for row in stencil)
    xs = np.array([[0.1, 0.1, 0.1], [1.9, 0.6, 1.2]])          # leaves 0 and another
    from vortexsim.fmm.tree import build_tree
    tree = build_tree(xs, xs, 2, np, lo=np.zeros(3), width=L)
    xs = xs[tree.src_order]
    x, a, s, start = ghost_sources(xs, np.ones((2, 3)), np.ones(2), tree.src_start,
                                   origin, shift, L, np)
    assert start[-1] == x.shape[0] and x.shape[0] > 2
    for g in range(origin.size):
        got = x[start[64 + g]:start[65 + g]]
        want = xs[tree.src_start[origin[g]]:tree.src_start[origin[g] + 1]] + L * shift[g]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kw, match", [
    (dict(net=True), "total vorticity"),
    (dict(sigma=0.2), "method='spectral'"),
    (dict(kernel="algebraic"), "far field is 1/r"),
    (dict(root=(np.zeros(3), L)), "root cube is the box"),
    (dict(box=-1.0), "box must be a positive"),
])
def test_clear_errors(rng, kw, match):
    x = rng.random((200, 3)) * L
    alpha = rng.normal(size=(200, 3))
    alpha -= alpha.mean(axis=0)
    if kw.pop("net", False):
        alpha = alpha + 1e-3
    sigma = kw.pop("sigma", 0.05)
    fmm = FMM(kw.pop("kernel", "gaussian"), tol=1e-6, device="cpu")
    with pytest.raises(ValueError, match=match):
        fmm.evaluate(x, alpha, sigma, **{"box": L, **kw})


def test_induced_velocity_periodic_methods(rng):
    """method='auto' with a box: the spectral sum for one σ, the periodic FMM for
    several σ; kernels without a 1/r far field are refused."""
    x, alpha, sigma, y = _elements(rng, 13, 1, m=50)
    u_auto, _ = induced_velocity(x, alpha, sigma, y, box=L, method="auto", tol=1e-6,
                                 device="cpu")
    u_spec, _ = induced_velocity(x, alpha, sigma, y, box=L, method="spectral", tol=1e-6,
                                 device="cpu")
    np.testing.assert_array_equal(u_auto, u_spec)
    # several σ: the FMM; the reference is the spectral sum at σ plus the (short-range)
    # difference of the direct sums over the 27 nearest images
    sig = np.full(x.shape[0], sigma)
    sig[::2] *= 0.9
    u_var, g_var = induced_velocity(x, alpha, sig, y, box=L, method="auto", tol=1e-3,
                                    device="cpu")
    u_ref, g_ref = _images_difference(x, alpha, sig, np.full_like(sig, sigma), y,
                                      "gaussian", "gaussian")
    u_ref, g_ref = u_ref + u_spec, g_ref + SpectralSum(L, sigma, 1e-10).evaluate(
        x, alpha, y)[1]
    assert _rel(u_var, u_ref) <= 1e-3 and _rel(g_var, g_ref) <= 1e-2
    with pytest.raises(ValueError, match="kernel='gaussian'"):
        induced_velocity(x, alpha, sigma, y, box=L, method="auto", kernel="winckelmans",
                         device="cpu")


# -- the GPU (marker gpu): the same algorithm through the CUDA stages -----------------

class _Reference:
    """The spectral sum at 1e-10 as the GPU tests' reference: FINUFFT on the CPU where it
    is installed, else the own NUFFT on the GPU (host arrays in and out)."""

    def __init__(self, sigma):
        self.ss = SpectralSum(1.0, sigma, 1e-10)
        try:
            import finufft  # noqa: F401
            self.xp = np
        except ImportError:
            import cupy
            self.xp = cupy

    def evaluate(self, x, alpha, y=None):
        xp = self.xp
        u, g = self.ss.evaluate(xp.asarray(x), xp.asarray(alpha),
                                None if y is None else xp.asarray(y))
        return (u, g) if xp is np else (u.get(), g.get())


def _gpu_case(n, s, m=2000, seed=0):
    """n³ uniform elements in the unit box shifted by −0.2 (some outside), Σα = 0,
    σ = s h; m targets in [−0.5, 1.5)³; the spectral sum at 1e-10 as reference."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-0.2, 0.8, (n ** 3, 3))
    alpha = rng.normal(size=x.shape) + np.sin(2 * np.pi * x[:, [1, 2, 0]])
    alpha -= alpha.mean(axis=0)
    y = rng.uniform(-0.5, 1.5, (m, 3))
    sigma = s / n
    return x, alpha, sigma, y, _Reference(sigma)


# GPU near stencil 3³: the reach must fit a quarter box (n ≥ 4 s ρ*(tol))
@pytest.mark.gpu
@pytest.mark.parametrize("precision, tol, s, n", [
    ("float64", 1e-6, 1, 32), ("float64", 1e-6, 2, 64),
    ("float32", 1e-3, 1, 32), ("float32", 1e-3, 2, 48)])
def test_gpu_matches_the_spectral_sum(precision, tol, s, n):
    import cupy as cp
    x, alpha, sigma, y, ref = _gpu_case(n, s)
    u_ref, g_ref = ref.evaluate(x, alpha, y)
    fmm = FMM("gaussian", tol=tol, precision=precision, device="gpu")
    u, g = fmm.evaluate(cp.asarray(x), cp.asarray(alpha), sigma, cp.asarray(y), box=1.0)
    assert u.dtype == np.dtype(precision)
    assert _rel(u.get(), u_ref) <= tol
    assert _rel(g.get(), g_ref) <= 10 * tol


@pytest.mark.gpu
def test_gpu_at_the_elements_and_through_induced_velocity():
    import cupy as cp
    x, alpha, sigma, _, ref = _gpu_case(32, 1)
    u_ref, g_ref = ref.evaluate(x, alpha)
    fmm = FMM("gaussian", tol=1e-6, device="gpu")
    u, g = fmm.evaluate(cp.asarray(x), cp.asarray(alpha), sigma, box=1.0)
    assert _rel(u.get(), u_ref) <= 1e-6 and _rel(g.get(), g_ref) <= 1e-5
    u2, g2 = induced_velocity(cp.asarray(x), cp.asarray(alpha), sigma, box=1.0,
                              method="fmm", tol=1e-6)
    assert _rel(u2.get(), u_ref) <= 1e-6 and _rel(g2.get(), g_ref) <= 1e-5
    with pytest.raises(ValueError, match="total vorticity"):
        fmm.evaluate(cp.asarray(x), cp.asarray(alpha + 1e-3), sigma, box=1.0)
