"""Cartesian Taylor expansions: each operator and the whole chain against direct sums."""
import math

import numpy as np
import pytest

from vortexsim.fmm import expansions as E
from vortexsim.kernels.cutoff import get_kernel
from vortexsim.kernels.direct import direct_sum_numpy

FAR_KERNELS = [("singular", 0.1), ("algebraic", 0.1), ("winckelmans", 0.1), ("gaussian", 0.05),
               ("polynomial", 0.2)]


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_multi_indices_are_complete_and_ordered():
    mi = E.multi_indices(5)
    assert mi.n == math.comb(5 + 3, 3)
    deg = mi.k.sum(axis=1)
    assert np.all(np.diff(deg) >= 0)
    assert np.all(mi.index[mi.k[:, 0], mi.k[:, 1], mi.k[:, 2]] == np.arange(mi.n))
    for d in range(6):
        assert np.all(deg[mi.degree_start[d]:mi.degree_start[d + 1]] == d)


@pytest.mark.parametrize("sigma2,terms", [(0.0, ((1.0, 0.5),)), (0.04, ((1.0, 0.5),)),
                                          (0.09, ((1.0, 0.5), (0.045, 1.5))), (0.01, ((2.0, 2.5),))])
def test_kernel_taylor_against_finite_differences(sigma2, terms):
    g = E.GreenFunction(terms, sigma2)

    def G(x):
        t = (x * x).sum(axis=-1) + sigma2
        return sum(c * t ** (-nu) for c, nu in terms)

    R = np.array([0.7, -0.4, 1.1])
    T = E.kernel_taylor(g, R[None], 3, np)[0]
    mi = E.multi_indices(3)
    h = 1e-3
    # D^k G by nested 4th-order central differences, k up to order 2
    w = np.array([1.0, -8.0, 8.0, -1.0]) / (12.0 * h)
    s = np.array([-2.0, -1.0, 1.0, 2.0]) * h

    def deriv(f, k):
        if k.sum() == 0:
            return f(R)
        i = int(np.argmax(k > 0))
        k2 = k.copy()
        k2[i] -= 1
        e = np.zeros(3)
        e[i] = 1.0
        return sum(wj * deriv(lambda x, sj=sj: f(x + sj * e), k2) for wj, sj in zip(w, s))

    for n, k in enumerate(mi.k):
        if k.sum() > 2:
            continue
        expect = deriv(G, k.copy()) / np.prod([math.factorial(int(v)) for v in k])
        assert abs(T[n] - expect) <= 1e-7 * max(1.0, abs(expect))


def test_kernel_taylor_singular_closed_forms():
    R = np.array([[0.3, -1.2, 0.5]])
    r = np.linalg.norm(R)
    T = E.kernel_taylor(E.green_function("singular", None), R, 2, np)[0]
    mi = E.multi_indices(2)
    assert T[0] == pytest.approx(1 / r, rel=1e-15)
    for i in range(3):
        e = np.zeros(3, int)
        e[i] = 1
        assert T[mi.index[tuple(e)]] == pytest.approx(-R[0, i] / r**3, rel=1e-14)
        e2 = 2 * e
        assert T[mi.index[tuple(e2)]] == pytest.approx((3 * R[0, i] ** 2 / r**5 - 1 / r**3) / 2,
                                                       rel=1e-13)


@pytest.mark.parametrize("kname,sigma", FAR_KERNELS)
def test_m2p_and_full_operator_chain(kname, sigma):
    """P2M → M2M → M2L → L2L → L2P (and P2M → M2P) against the direct sum."""
    rng = np.random.default_rng(3)
    g = E.green_function(kname, sigma)
    c_m, child = np.zeros(3), np.array([0.25, -0.25, 0.25])
    y = child + (rng.random((50, 3)) - 0.5) * 0.5
    a = rng.normal(size=(50, 3))
    c_l = np.array([3.0, 1.0, -1.0])
    c_lc = c_l + np.array([-0.25, 0.25, 0.25])
    x = c_lc + (rng.random((40, 3)) - 0.5) * 0.5
    ud, gd = direct_sum_numpy(get_kernel(kname), y, a, np.full(50, sigma), x)
    errors = []
    for order in (4, 8, 12):
        m_child = E.p2m(y, a, child, order, np)
        M = E.shift_matrices((child - c_m)[None], order, np, "m2m")[0] @ m_child
        np.testing.assert_allclose(M, E.p2m(y, a, c_m, order, np), rtol=1e-12, atol=1e-12)  # exact
        L = E.m2l_matrices(g, (c_l - c_m)[None], order, np)[0] @ M
        Lc = E.shift_matrices((c_lc - c_l)[None], order, np, "l2l")[0] @ L
        u, gr = E.l2p(np.broadcast_to(Lc, (40,) + Lc.shape), x - c_lc, order, np)
        um, gm = E.m2p(g, M, c_m, x, order, np)
        errors.append((_rel(u, ud), _rel(gr, gd), _rel(um, ud), _rel(gm, gd)))
    errors = np.array(errors)
    assert np.all(np.diff(errors, axis=0) < 0), errors          # converges with the order
    assert errors[-1, 0] < 1e-7 and errors[-1, 2] < 1e-7         # order 12: u
    assert errors[-1, 1] < 1e-6 and errors[-1, 3] < 1e-6         # and grad u


def test_l2l_is_exact_for_polynomials():
    rng = np.random.default_rng(1)
    order = 5
    mi = E.multi_indices(order)
    L = rng.normal(size=(mi.n, 3))
    d = np.array([0.3, -0.2, 0.1])
    Lc = E.shift_matrices(d[None], order, np, "l2l")[0] @ L
    h = rng.normal(size=(7, 3)) * 0.3
    p_parent = E.monomials(h + d, order, np) @ L
    p_child = E.monomials(h, order, np) @ Lc
    np.testing.assert_allclose(p_child, p_parent, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("order", [3, 8])
def test_harmonic_compression_of_the_m2l_is_exact(order):
    U, V = E.harmonic_bases(order)
    r = (order + 1) ** 2
    assert U.shape == V.shape == (E.multi_indices(order).n, r)
    np.testing.assert_allclose(U.T @ U, np.eye(r), atol=1e-12)
    np.testing.assert_allclose(V.T @ V, np.eye(r), atol=1e-12)
    K = E.unit_m2l_cores(order)
    g = E.green_function("singular", None)
    for o in (0, 100, 171, 342):                       # corners, middle; 171 is d = 0
        d = E.OFFSETS_3[o]
        C = K[:, o * r:(o + 1) * r]
        if np.abs(d).max() < 2:
            assert not C.any()
            continue
        A = E.m2l_matrices(g, -d[None, :].astype(float), order, np)[0]
        np.testing.assert_allclose(U @ C @ V.T, A, rtol=0, atol=1e-13 * np.abs(A).max())


def test_l2p_box_equals_l2p():
    rng = np.random.default_rng(4)
    order = 7
    L = rng.normal(size=(E.multi_indices(order).n, 3))
    h = rng.normal(size=(20, 3)) * 0.2
    u1, g1 = E.l2p(np.broadcast_to(L, (20,) + L.shape), h, order, np)
    u2, g2 = E.l2p_box(L, h, order, np)
    np.testing.assert_allclose(u2, u1, rtol=1e-12, atol=1e-12 * np.abs(u1).max())
    np.testing.assert_allclose(g2, g1, rtol=1e-12, atol=1e-12 * np.abs(g1).max())
