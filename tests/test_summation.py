"""Tests of the public API ``vortexsim.induced_velocity`` (``vortexsim/summation.py``)
and of the blocked NumPy direct sum behind it (``vortexsim/kernels/direct.py``).

Expected values come from ``physics.md`` only: a naive pair loop written here from
its formulas, finite differences, exact identities (ring centre, linearity,
rotation, zero trace, conservation of Σα under transpose stretching).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vortexsim
from vortexsim import KERNELS, induced_velocity, stretching
from vortexsim.backend import Device, gpu_available
from vortexsim.kernels import direct
from vortexsim.kernels.direct import direct_sum_numpy

KERNEL_NAMES = ("singular", "gaussian", "algebraic", "winckelmans", "polynomial")
SMOOTH = ("gaussian", "algebraic", "winckelmans")
INV_4PI = 1.0 / (4.0 * math.pi)
# lim_{ρ→0} q(ρ)/ρ³ (physics.md formulas): A(r = 0) = this / σ³ for the smooth kernels
Q_OVER_RHO3_AT_0 = {"gaussian": math.sqrt(2.0 / math.pi) / 3.0, "algebraic": 1.0,
                    "winckelmans": 2.5}

LEVI_CIVITA = np.zeros((3, 3, 3))
for _i, _j, _k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
    LEVI_CIVITA[_i, _j, _k] = 1.0
    LEVI_CIVITA[_i, _k, _j] = -1.0


# --- helpers --------------------------------------------------------------

def velocity(*args, **kwargs):
    """``induced_velocity`` on the CPU (the NumPy specification) unless a test says otherwise.

    With device="auto" a machine with a GPU would run the CUDA path; this suite tests the
    NumPy one (tests/test_gpu_direct.py compares the two).
    """
    kwargs.setdefault("device", "cpu")
    return induced_velocity(*args, **kwargs)


def random_elements(rng, n, *, per_element_sigma=True, sigma_range=(0.2, 0.4)):
    x = rng.uniform(0.0, 1.0, size=(n, 3))
    alpha = rng.normal(size=(n, 3))
    sigma = rng.uniform(*sigma_range, size=n) if per_element_sigma else float(
        rng.uniform(*sigma_range))
    return x, alpha, sigma


def clean_targets(rng, x, sigma, m, *, low=-0.3, high=1.3, r_min=0.1, kink_gap=0.01):
    """m points at distance > r_min from every source and > kink_gap from every r = σ_p."""
    sig = np.broadcast_to(np.asarray(sigma, dtype=float), (x.shape[0],))
    out = []
    while len(out) < m:
        y = rng.uniform(low, high, size=3)
        r = np.linalg.norm(y - x, axis=1)
        if r.min() > r_min and np.abs(r - sig).min() > kink_gap:
            out.append(y)
    return np.array(out)


def random_rotation(rng):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def naive_reference(name, x, alpha, sigma, targets=None):
    """Pair-by-pair sum of the physics.md formulas with the kernel's q and f.

    targets=None: evaluate at the elements and skip the pair p = target.
    A pair at r = 0 (targets given): smooth kernels contribute their finite limit
    lim q/r³ = (lim q/ρ³)/σ³ to the ε term, the others nothing (documented convention).
    """
    kern = KERNELS[name]
    n = x.shape[0]
    sig = np.broadcast_to(np.asarray(sigma, dtype=float), (n,))
    exclude_self = targets is None
    y = x if exclude_self else targets
    u = np.zeros((y.shape[0], 3))
    grad = np.zeros((y.shape[0], 3, 3))
    for i in range(y.shape[0]):
        for p in range(n):
            if exclude_self and i == p:
                continue
            r_vec = y[i] - x[p]
            r = math.sqrt(float(r_vec @ r_vec))
            eps_alpha = np.einsum("acb,c->ab", LEVI_CIVITA, alpha[p])   # ε_acb α_c
            if r == 0.0:
                if name in SMOOTH:
                    grad[i] += INV_4PI * Q_OVER_RHO3_AT_0[name] / sig[p] ** 3 * eps_alpha
                continue
            rho = np.float64(r / sig[p])
            q = float(kern.q(rho, np))
            f = float(kern.f(rho, np))
            a_cross_r = np.cross(alpha[p], r_vec)
            u[i] += INV_4PI * q * a_cross_r / r**3
            grad[i] += INV_4PI * (q / r**3 * eps_alpha - f / r**5 * np.outer(a_cross_r, r_vec))
    return u, grad


def fd_gradient(x, alpha, sigma, targets, kernel, h):
    """Fourth-order central differences of u: G[i, a, b] = ∂u_a/∂y_b."""
    m = targets.shape[0]
    shifts = (-2, -1, 1, 2)
    weights = (1.0, -8.0, 8.0, -1.0)
    stacked = [targets + k * h * np.eye(3)[b] for b in range(3) for k in shifts]
    u, _ = velocity(x, alpha, sigma, np.concatenate(stacked), kernel=kernel,
                            gradient=False)
    u = u.reshape(3, len(shifts), m, 3)
    grad = np.zeros((m, 3, 3))
    for b in range(3):
        grad[:, :, b] = sum(w * u[b, j] for j, w in enumerate(weights)) / (12.0 * h)
    return grad


def assert_close_to(actual, expected, rel):
    """|actual − expected| ≤ rel · max|expected| elementwise (a relative array norm)."""
    scale = np.max(np.abs(expected))
    assert scale > 0
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rel * scale)


# --- gradient -------------------------------------------------------------

@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_grad_matches_finite_differences(kernel, rng):
    x, alpha, sigma = random_elements(rng, 30)
    targets = clean_targets(rng, x, sigma, 12)
    if kernel in SMOOTH:
        # smooth kernels: also at the sources themselves (self term included) and at
        # points well inside the cores
        targets = np.concatenate([targets, x[:6], x[6:12] + rng.normal(scale=0.05, size=(6, 3))])
    _, grad = velocity(x, alpha, sigma, targets, kernel=kernel)
    grad_fd = fd_gradient(x, alpha, sigma, targets, kernel, h=1e-4)
    err = np.linalg.norm(grad_fd - grad, axis=(1, 2))
    norm = np.linalg.norm(grad, axis=(1, 2))
    assert np.all(err <= 1e-7 * norm), (err / norm).max()


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("with_targets", [False, True])
def test_grad_is_trace_free(kernel, with_targets, rng):
    x, alpha, sigma = random_elements(rng, 40)
    targets = clean_targets(rng, x, sigma, 15) if with_targets else None
    _, grad = velocity(x, alpha, sigma, targets, kernel=kernel)
    trace = np.einsum("iaa->i", grad)
    norm = np.linalg.norm(grad, axis=(1, 2))
    assert np.all(np.abs(trace) <= 1e-14 * norm), (np.abs(trace) / norm).max()


# --- naive reference ------------------------------------------------------

@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("per_element_sigma", [False, True], ids=["scalar_sigma", "sigma_array"])
@pytest.mark.parametrize("with_targets", [False, True], ids=["self", "targets"])
def test_matches_naive_pair_loop(kernel, per_element_sigma, with_targets, rng):
    x, alpha, sigma = random_elements(rng, 15, per_element_sigma=per_element_sigma)
    # targets spread over the sources' region, inside and outside the cores
    targets = clean_targets(rng, x, sigma, 10, r_min=0.02, kink_gap=1e-3) if with_targets \
        else None
    u, grad = velocity(x, alpha, sigma, targets, kernel=kernel)
    u_ref, grad_ref = naive_reference(kernel, x, alpha, sigma, targets)
    assert u.shape == u_ref.shape and grad.shape == grad_ref.shape
    assert_close_to(u, u_ref, 1e-12)
    assert_close_to(grad, grad_ref, 1e-12)


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_targets_equal_to_sources(kernel, rng):
    """targets=None excludes self pairs; targets=x includes them (finite for smooth kernels)."""
    x, alpha, sigma = random_elements(rng, 25)
    u_self, grad_self = velocity(x, alpha, sigma, kernel=kernel)
    u_tx, grad_tx = velocity(x, alpha, sigma, x.copy(), kernel=kernel)
    # the self pair has r = 0, hence α × r = 0: u is unaffected
    assert_close_to(u_tx, u_self, 1e-15)
    if kernel in SMOOTH:
        # grad_u gains (1/4π) A(0, σ_p) ε_acb α_c with A(0) = (lim q/ρ³)/σ³
        a0 = Q_OVER_RHO3_AT_0[kernel] / sigma**3
        self_term = INV_4PI * a0[:, None, None] * np.einsum("acb,pc->pab", LEVI_CIVITA, alpha)
        assert_close_to(grad_tx - grad_self, self_term, 1e-13)
        assert np.all(np.linalg.norm(self_term, axis=(1, 2)) > 0)
    else:
        # singular kernels: the pair at r = 0 contributes nothing (documented convention)
        assert_close_to(grad_tx, grad_self, 1e-15)
    u_ref, grad_ref = naive_reference(kernel, x, alpha, sigma, x)
    assert_close_to(u_tx, u_ref, 1e-12)
    assert_close_to(grad_tx, grad_ref, 1e-12)


def test_self_exclusion_matches_leaving_the_element_out(rng):
    x, alpha, sigma = random_elements(rng, 12)
    u, grad = velocity(x, alpha, sigma, kernel="gaussian")
    for i in range(x.shape[0]):
        keep = np.arange(x.shape[0]) != i
        u_i, grad_i = velocity(x[keep], alpha[keep], sigma[keep], x[i:i + 1])
        assert_close_to(u[i:i + 1], u_i, 1e-14)
        assert_close_to(grad[i:i + 1], grad_i, 1e-14)


# --- exact identities -----------------------------------------------------

@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("with_targets", [False, True])
def test_linear_in_alpha(kernel, with_targets, rng):
    x, alpha1, sigma = random_elements(rng, 30)
    alpha2 = rng.normal(size=alpha1.shape)
    a, b = 1.7, -0.6
    targets = clean_targets(rng, x, sigma, 10) if with_targets else None
    u1, g1 = velocity(x, alpha1, sigma, targets, kernel=kernel)
    u2, g2 = velocity(x, alpha2, sigma, targets, kernel=kernel)
    u12, g12 = velocity(x, a * alpha1 + b * alpha2, sigma, targets, kernel=kernel)
    assert_close_to(u12, a * u1 + b * u2, 1e-13)
    assert_close_to(g12, a * g1 + b * g2, 1e-13)


def _check_rotation(kernel, rng, n, m):
    x, alpha, sigma = random_elements(rng, n)
    targets = clean_targets(rng, x, sigma, m)
    rot = random_rotation(rng)
    shift = rng.normal(size=3)
    for tgt in (None, targets):
        u, g = velocity(x, alpha, sigma, tgt, kernel=kernel)
        u_r, g_r = velocity(x @ rot.T + shift, alpha @ rot.T, sigma,
                                    None if tgt is None else tgt @ rot.T + shift,
                                    kernel=kernel)
        # α is a pseudovector, but a proper rotation (det Q = 1) rotates it like a vector
        assert_close_to(u_r, u @ rot.T, 1e-12)
        assert_close_to(g_r, np.einsum("ac,icd,bd->iab", rot, g, rot), 1e-12)


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_rotation_and_translation_covariance(kernel, rng):
    _check_rotation(kernel, rng, 30, 10)


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("n_elements", [1, 2, 3, 7, 64, 1000])
@pytest.mark.parametrize("sigma_over_r", [0.3, 1.3])
def test_ring_centre_velocity(kernel, n_elements, sigma_over_r, rng):
    """Velocity at the centre of a ring of N equal elements is (Γ/2R) q(R/σ) n̂, for every N.

    Each element sits at distance R from the centre with α_p ⊥ (centre − x_p), so each one
    contributes exactly Γ q(R/σ)/(2RN) n̂.
    """
    radius, gamma = 0.7, 2.3
    sigma = sigma_over_r * radius
    rot = random_rotation(rng)
    e1, e2, axis = rot[:, 0], rot[:, 1], rot[:, 2]     # right-handed: e1 × e2 = axis
    centre = rng.uniform(-5.0, 5.0, size=3)
    phi = rng.uniform(0, 2 * math.pi) + 2 * math.pi * np.arange(n_elements) / n_elements
    radial = np.cos(phi)[:, None] * e1 + np.sin(phi)[:, None] * e2
    tangent = -np.sin(phi)[:, None] * e1 + np.cos(phi)[:, None] * e2  # axis × radial
    x = centre + radius * radial
    alpha = gamma * (2 * math.pi * radius / n_elements) * tangent
    u, _ = velocity(x, alpha, sigma, centre[None, :], kernel=kernel)
    q = float(KERNELS[kernel].q(np.float64(1.0 / sigma_over_r), np))
    expected = gamma / (2 * radius) * q * axis
    assert np.linalg.norm(u[0] - expected) <= 1e-13 * np.linalg.norm(expected)


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_transpose_stretching_conserves_total_strength(kernel, rng):
    # conservation needs a pair kernel symmetric in (p, q): one σ for all elements
    x, alpha, sigma = random_elements(rng, 40, per_element_sigma=False)
    _, grad = velocity(x, alpha, sigma, kernel=kernel)
    rate = stretching(alpha, grad, "transpose")
    scale = np.abs(rate).sum(axis=0)
    assert np.all(np.abs(rate.sum(axis=0)) <= 1e-13 * scale), rate.sum(axis=0) / scale
    # the classical scheme does not conserve Σα (generic data: far from round-off)
    classical = stretching(alpha, grad, "classical")
    assert np.max(np.abs(classical.sum(axis=0)) / np.abs(classical).sum(axis=0)) > 1e-6


def test_far_field_of_smooth_kernels_is_singular(rng):
    x, alpha, _ = random_elements(rng, 20)
    sigma = 0.05
    targets = rng.normal(size=(10, 3))
    targets = 0.5 + 3.0 * targets / np.linalg.norm(targets, axis=1, keepdims=True)  # ρ > 40
    u_s, g_s = velocity(x, alpha, sigma, targets, kernel="singular")
    u_g, g_g = velocity(x, alpha, sigma, targets, kernel="gaussian")
    assert_close_to(u_g, u_s, 1e-14)
    assert_close_to(g_g, g_s, 1e-14)


# --- sizes ----------------------------------------------------------------

@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_single_element(kernel, rng):
    x = rng.normal(size=(1, 3))
    alpha = rng.normal(size=(1, 3))
    sigma = 0.3
    u, grad = velocity(x, alpha, sigma, kernel=kernel)
    assert u.shape == (1, 3) and grad.shape == (1, 3, 3)
    np.testing.assert_array_equal(u, 0.0)      # no self-induced velocity
    np.testing.assert_array_equal(grad, 0.0)
    # one element seen from elsewhere: the physics.md formula
    targets = x + np.array([[0.5, -0.2, 0.1], [0.05, 0.1, 0.0], [-1.0, 2.0, 3.0]])
    u, grad = velocity(x, alpha, sigma, targets, kernel=kernel)
    r_vec = targets - x
    r = np.linalg.norm(r_vec, axis=1)
    q = KERNELS[kernel].q(r / sigma, np)
    f = KERNELS[kernel].f(r / sigma, np)
    cr = np.cross(alpha[0], r_vec)
    u_exp = INV_4PI * (q / r**3)[:, None] * cr
    eps_alpha = np.einsum("acb,c->ab", LEVI_CIVITA, alpha[0])
    g_exp = INV_4PI * ((q / r**3)[:, None, None] * eps_alpha
                       - (f / r**5)[:, None, None] * np.einsum("ia,ib->iab", cr, r_vec))
    np.testing.assert_allclose(u, u_exp, rtol=1e-13)
    np.testing.assert_allclose(grad, g_exp, rtol=1e-13, atol=1e-14 * np.abs(g_exp).max())


@pytest.mark.parametrize("gradient", [True, False])
def test_empty_targets_and_empty_sources(gradient, rng):
    x, alpha, sigma = random_elements(rng, 5)
    u, grad = velocity(x, alpha, sigma, np.zeros((0, 3)), gradient=gradient)
    assert u.shape == (0, 3) and u.dtype == np.float64
    if gradient:
        assert grad.shape == (0, 3, 3) and grad.dtype == np.float64
    else:
        assert grad is None
    # no sources: zero velocity at the targets
    u, grad = velocity(np.zeros((0, 3)), np.zeros((0, 3)), 0.1, x, gradient=gradient)
    np.testing.assert_array_equal(u, np.zeros((5, 3)))
    if gradient:
        np.testing.assert_array_equal(grad, np.zeros((5, 3, 3)))
    u, grad = velocity(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0))
    assert u.shape == (0, 3)


def test_gradient_false_returns_same_velocity(rng):
    x, alpha, sigma = random_elements(rng, 20)
    u, grad = velocity(x, alpha, sigma)
    u2, grad2 = velocity(x, alpha, sigma, gradient=False)
    assert grad2 is None
    np.testing.assert_array_equal(u, u2)


def test_input_conversions(rng):
    """Lists, integer arrays, 0-d sigma, Device objects and method='auto' are accepted."""
    x = rng.integers(-3, 4, size=(8, 3))
    alpha = rng.integers(-2, 3, size=(8, 3))
    ref_u, ref_g = velocity(x.astype(float), alpha.astype(float), np.full(8, 0.5))
    for kwargs in (dict(x=x.tolist(), alpha=alpha.tolist(), sigma=0.5),
                   dict(x=x, alpha=alpha, sigma=np.float64(0.5)),
                   dict(x=x, alpha=alpha, sigma=np.array(0.5)),
                   dict(x=x, alpha=alpha, sigma=[0.5] * 8)):
        for extra in ({}, {"method": "auto"}, {"device": Device("cpu")}, {"device": "auto"}):
            u, g = velocity(**kwargs, **extra)
            assert isinstance(u, np.ndarray) and u.dtype == np.float64
            assert u.flags.c_contiguous and g.flags.c_contiguous
            # "auto" may pick a GPU: same sum, another summation order
            rel = 1e-12 if extra.get("device") == "auto" else 0.0
            assert_close_to(u, ref_u, rel)
            assert_close_to(g, ref_g, rel)
    assert vortexsim.induced_velocity is induced_velocity


# --- precision ------------------------------------------------------------

@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("with_targets", [False, True])
def test_float32_precision(kernel, with_targets, rng):
    x, alpha, sigma = random_elements(rng, 40)
    targets = clean_targets(rng, x, sigma, 15) if with_targets else None
    u64, g64 = velocity(x, alpha, sigma, targets, kernel=kernel)
    u32, g32 = velocity(x, alpha, sigma, targets, kernel=kernel, precision="float32")
    assert u32.dtype == np.float32 and g32.dtype == np.float32
    assert u32.shape == u64.shape and g32.shape == g64.shape
    assert_close_to(u32, u64, 1e-5)
    assert_close_to(g32, g64, 1e-5)
    # float32 inputs with the default precision are computed in float64
    u, _ = velocity(x.astype(np.float32), alpha.astype(np.float32), sigma, targets,
                            kernel=kernel)
    assert u.dtype == np.float64


# --- blocking (memory O(N + M)) ---------------------------------------------

@pytest.mark.parametrize("kernel", KERNEL_NAMES)
@pytest.mark.parametrize("exclude_self", [False, True])
def test_blocked_sum_independent_of_block_size(kernel, exclude_self, rng, monkeypatch):
    n = 53
    x, alpha, sigma = random_elements(rng, n)
    targets = x if exclude_self else clean_targets(rng, x, sigma, 37)
    kern = KERNELS[kernel]
    u_ref, g_ref = direct_sum_numpy(kern, x, alpha, sigma, targets, exclude_self=exclude_self)

    seen = []
    original = direct._accumulate_block

    def spy(kernel_, d, *args, **kwargs):
        seen.append(d.shape[0] * d.shape[1])
        return original(kernel_, d, *args, **kwargs)

    monkeypatch.setattr(direct, "_accumulate_block", spy)
    for pairs_per_block in (1, 7, 64, 1000):
        seen.clear()
        u, g = direct_sum_numpy(kern, x, alpha, sigma, targets, exclude_self=exclude_self,
                                pairs_per_block=pairs_per_block)
        assert max(seen) <= pairs_per_block        # never more than one block of pairs
        assert len(seen) > 1
        assert_close_to(u, u_ref, 1e-13)
        assert_close_to(g, g_ref, 1e-13)
    if exclude_self:   # the self pairs are skipped across block boundaries too
        u_naive, g_naive = naive_reference(kernel, x, alpha, sigma)
        assert_close_to(u_ref, u_naive, 1e-12)
        assert_close_to(g_ref, g_naive, 1e-12)


# --- errors ---------------------------------------------------------------

def _good(rng, n=5):
    return rng.normal(size=(n, 3)), rng.normal(size=(n, 3)), np.full(n, 0.2)


@pytest.mark.parametrize("case, exc, match", [
    ("x_n2", ValueError, r"x has shape \(5, 2\); expected \(N, 3\)"),
    ("x_1d", ValueError, r"x has shape \(15,\); expected \(N, 3\)"),
    ("alpha_n", ValueError, r"alpha has shape \(6, 3\); expected \(5, 3\)"),
    ("alpha_n4", ValueError, r"alpha has shape \(5, 4\); expected \(5, 3\)"),
    ("sigma_len", ValueError, r"sigma has shape \(4,\); expected a scalar or \(5,\)"),
    ("sigma_2d", ValueError, r"sigma has shape \(5, 1\); expected a scalar or \(5,\)"),
    ("targets_m4", ValueError, r"targets has shape \(3, 4\); expected \(\w, 3\)"),
    ("x_complex", TypeError, r"x has dtype complex128; expected real floating-point"),
    ("alpha_complex", TypeError, r"alpha has dtype complex128; expected real"),
    ("sigma_complex", TypeError, r"sigma has dtype complex128; expected real"),
    ("targets_complex", TypeError, r"targets has dtype complex64; expected real"),
    ("x_str", TypeError, r"x has dtype <U\d+; expected real floating-point"),
    ("sigma_str", TypeError, r"sigma has dtype <U\d+; expected real"),
    ("alpha_object", TypeError, r"alpha has dtype object; expected real"),
    ("x_ragged", TypeError, r"x must be an array of shape \(N, 3\); got list"),
    ("alpha_bool", TypeError, r"alpha has dtype bool; expected real"),
    ("sigma_bool", TypeError, r"sigma has dtype bool; expected real"),
    ("x_nan", ValueError, r"x contains NaN or inf \(first at row 2\)"),
    ("x_inf", ValueError, r"x contains NaN or inf \(first at row 4\)"),
    ("alpha_nan", ValueError, r"alpha contains NaN or inf \(first at row 0\)"),
    ("alpha_inf", ValueError, r"alpha contains NaN or inf \(first at row 3\)"),
    ("sigma_nan", ValueError, r"sigma contains NaN or inf \(first at row 1\)"),
    ("sigma_nan_scalar", ValueError, r"sigma contains NaN or inf"),
    ("sigma_inf", ValueError, r"sigma contains NaN or inf"),
    ("targets_nan", ValueError, r"targets contains NaN or inf \(first at row 1\)"),
    ("targets_neg_inf", ValueError, r"targets contains NaN or inf \(first at row 0\)"),
    ("sigma_zero", ValueError, r"sigma must be > 0 .*got min\(sigma\) = 0\.0"),
    ("sigma_zero_scalar", ValueError, r"sigma must be > 0"),
    ("sigma_negative", ValueError, r"sigma must be > 0 .*got min\(sigma\) = -0\.1"),
    ("kernel_typo", ValueError, r"Unknown kernel 'gausian'.*Did you mean 'gaussian'\?"),
    ("kernel_case", ValueError, r"Unknown kernel 'Gaussian'.*Did you mean 'gaussian'\?"),
    ("kernel_unknown", ValueError, r"Unknown kernel 'vatistas'; expected one of \["),
    ("precision", ValueError, r"precision must be one of \('float64', 'float32'\), got 'float16'"),
    ("precision_dtype", ValueError, r"precision must be one of .*got dtype\('float32'\)"),
    ("device", ValueError, r"device must be one of \('cpu', 'gpu', 'auto'\), got 'cuda'"),
    ("device_none", ValueError, r"device must be one of .*got None"),
    ("method", ValueError,
     r"method must be one of \('direct', 'fmm', 'spectral', 'auto'\), got 'tree'"),
    ("gradient", TypeError, r"gradient must be True or False, got 'yes'"),
    ("tol", ValueError, r"tol must be a number in \(0, 1\), got 2"),
    ("tol_negative", ValueError, r"tol must be a number in \(0, 1\), got -1e-06"),
])
def test_bad_input_raises(case, exc, match, rng):
    x, alpha, sigma = _good(rng)
    targets = rng.normal(size=(3, 3))
    kwargs = {}
    if case == "x_n2":
        x = x[:, :2]
    elif case == "x_1d":
        x = x.ravel()
    elif case == "alpha_n":
        alpha = rng.normal(size=(6, 3))
    elif case == "alpha_n4":
        alpha = rng.normal(size=(5, 4))
    elif case == "sigma_len":
        sigma = sigma[:4]
    elif case == "sigma_2d":
        sigma = sigma[:, None]
    elif case == "targets_m4":
        targets = rng.normal(size=(3, 4))
    elif case == "x_complex":
        x = x + 1j
    elif case == "alpha_complex":
        alpha = alpha.astype(complex)
    elif case == "sigma_complex":
        sigma = 0.2 + 0.1j
    elif case == "targets_complex":
        targets = targets.astype(np.complex64)
    elif case == "x_str":
        x = x.astype(str)
    elif case == "sigma_str":
        sigma = "0.2"
    elif case == "alpha_object":
        alpha = alpha.astype(object)
    elif case == "x_ragged":
        x = [[0.0, 0.0, 0.0], [1.0, 2.0]]
    elif case == "alpha_bool":
        alpha = alpha > 0
    elif case == "sigma_bool":
        sigma = True
    elif case == "x_nan":
        x[2, 1] = np.nan
    elif case == "x_inf":
        x[4, 2] = np.inf
    elif case == "alpha_nan":
        alpha[0, 0] = np.nan
    elif case == "alpha_inf":
        alpha[3, 1] = -np.inf
    elif case == "sigma_nan":
        sigma[1] = np.nan
    elif case == "sigma_nan_scalar":
        sigma = float("nan")
    elif case == "sigma_inf":
        sigma = np.inf
    elif case == "targets_nan":
        targets[1, 2] = np.nan
    elif case == "targets_neg_inf":
        targets[0, 0] = -np.inf
    elif case == "sigma_zero":
        sigma[3] = 0.0
    elif case == "sigma_zero_scalar":
        sigma = 0.0
    elif case == "sigma_negative":
        sigma[2] = -0.1
    elif case == "kernel_typo":
        kwargs["kernel"] = "gausian"
    elif case == "kernel_case":
        kwargs["kernel"] = "Gaussian"
    elif case == "kernel_unknown":
        kwargs["kernel"] = "vatistas"
    elif case == "precision":
        kwargs["precision"] = "float16"
    elif case == "precision_dtype":
        kwargs["precision"] = np.dtype("float32")
    elif case == "device":
        kwargs["device"] = "cuda"
    elif case == "device_none":
        kwargs["device"] = None
    elif case == "method":
        kwargs["method"] = "tree"
    elif case == "gradient":
        kwargs["gradient"] = "yes"
    elif case == "tol":
        kwargs["tol"] = 2
    elif case == "tol_negative":
        kwargs["tol"] = -1e-6
    else:
        raise AssertionError(case)
    with pytest.raises(exc, match=match):
        velocity(x, alpha, sigma, targets, **kwargs)


@pytest.mark.skipif(gpu_available(), reason="a usable GPU is present")
def test_device_gpu_without_gpu_raises(rng):
    x, alpha, sigma = _good(rng)
    with pytest.raises(RuntimeError, match=r"device='gpu'.*(CuPy|GPU)"):
        velocity(x, alpha, sigma, device="gpu")
    # "auto" falls back to the CPU silently
    u, _ = velocity(x, alpha, sigma, device="auto")
    assert isinstance(u, np.ndarray)


# --- property-based -------------------------------------------------------

seeds = st.integers(min_value=0, max_value=2**32 - 1)
kernels = st.sampled_from(KERNEL_NAMES)


@settings(max_examples=30, deadline=None)
@given(seed=seeds, kernel=kernels, a=st.floats(-3, 3), b=st.floats(-3, 3))
def test_property_linear_in_alpha(seed, kernel, a, b):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 20))
    x, alpha1, sigma = random_elements(rng, n, per_element_sigma=bool(rng.integers(2)))
    alpha2 = rng.normal(size=(n, 3))
    u1, g1 = velocity(x, alpha1, sigma, kernel=kernel)
    u2, g2 = velocity(x, alpha2, sigma, kernel=kernel)
    u12, g12 = velocity(x, a * alpha1 + b * alpha2, sigma, kernel=kernel)
    # round-off scale: the terms combined, not their (possibly cancelling) sum
    scale_u = abs(a) * np.abs(u1).max() + abs(b) * np.abs(u2).max()
    scale_g = abs(a) * np.abs(g1).max() + abs(b) * np.abs(g2).max()
    np.testing.assert_allclose(u12, a * u1 + b * u2, rtol=0, atol=1e-13 * scale_u + 1e-300)
    np.testing.assert_allclose(g12, a * g1 + b * g2, rtol=0, atol=1e-13 * scale_g + 1e-300)


@settings(max_examples=30, deadline=None)
@given(seed=seeds, kernel=kernels)
def test_property_rotation_covariance(seed, kernel):
    rng = np.random.default_rng(seed)
    _check_rotation(kernel, rng, int(rng.integers(2, 20)), int(rng.integers(1, 6)))


@settings(max_examples=30, deadline=None)
@given(seed=seeds, kernel=kernels)
def test_property_no_self_velocity(seed, kernel):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(1, 3)) * 10
    u, grad = velocity(x, rng.normal(size=(1, 3)), float(rng.uniform(0.01, 2)),
                               kernel=kernel)
    np.testing.assert_array_equal(u, 0.0)
    np.testing.assert_array_equal(grad, 0.0)


@pytest.mark.parametrize("kernel", ["gaussian4", "gaussian6"])
def test_high_order_gaussians_outside_the_periodic_spectral_sum_are_refused(kernel):
    """The high-order Gaussians exist only in the periodic spectral sum: the direct sum,
    the FMM and the periodic FMM refuse them in one clear line."""
    from vortexsim.fmm.evaluator import FMM

    x = np.random.default_rng(0).random((20, 3))
    alpha = np.random.default_rng(1).standard_normal((20, 3))
    alpha -= alpha.mean(axis=0)
    for method in ("direct", "fmm"):
        with pytest.raises(ValueError, match="only by the periodic spectral sum"):
            vortexsim.induced_velocity(x, alpha, 0.1, kernel=kernel, method=method,
                                       device="cpu")
    with pytest.raises(ValueError, match=kernel):
        vortexsim.induced_velocity(x, alpha, 0.1, kernel=kernel, method="fmm", box=1.0,
                                   device="cpu")
    with pytest.raises(ValueError, match=kernel):
        FMM(kernel, device="cpu")


def test_self_pair_factors_made_once_per_core_array_in_a_step(rng):
    """A time stepper's evaluations (``plan`` given) compute the self pairs' A(0, σ) once
    per σ array (a run without core spreading keeps one) and give what a fresh
    computation gives; a new σ array, or a call without a plan, computes them again."""
    from vortexsim.summation import StepPlan
    from vortexsim.summation import make_summation as Summation
    x, alpha = rng.random((40, 3)), rng.normal(size=(40, 3))
    sigma = np.full(40, 0.1)
    s = Summation("direct", "gaussian")
    kw = dict(n_self=40, plan=StepPlan(records=False))
    _, g0 = s(x, alpha, sigma, x, **kw)
    a0 = s._self_factors(sigma, 40, np, reuse=True)
    assert s._self_factors(sigma, 40, np, reuse=True) is a0, "reused, not recomputed"
    _, g1 = s(x, alpha, sigma, x, **kw)
    fresh = Summation("direct", "gaussian")(x, alpha, sigma, x, n_self=40)[1]
    assert np.array_equal(g0, g1) and np.array_equal(g1, fresh)
    other = sigma.copy()
    assert s._self_factors(other, 40, np, reuse=True) is not a0       # a new σ array
    assert s._self_factors(other, 40, np, reuse=False) is not \
        s._self_factors(other, 40, np, reuse=False)                    # no plan: never
    assert np.array_equal(s._self_factors(2 * sigma, 40, np, reuse=True), a0 / 8)
