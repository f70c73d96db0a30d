"""The diagnostics' fields on the GPU (p2p_fields, l2p_values) against the NumPy stages and
the all-pairs sums (vortexsim.fmm.fields)."""
import numpy as np
import pytest

from vortexsim import diagnostics as D
from vortexsim.diagnostics import row as S
from vortexsim.backend import to_host
from vortexsim.cases.registry import make_case
from vortexsim.fmm.evaluator import FMM

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("kernel, sigma", [
    ("gaussian", "mixed"), ("gaussian", 0.03), ("algebraic", 0.04), ("winckelmans", 0.04), ("singular", 0.04),
    ("polynomial", "mixed")])
def test_gpu_fields_equal_the_cpu_fields(kernel, sigma):
    import cupy as cp
    rng = np.random.default_rng(0)
    # leaves of 16 points: depth 3 (M2M, M2L at two levels, L2L) for the Gaussian with
    # several cores, whose 1/r far field the singular and polynomial kernels share; depth
    # 2 for the others, whose own GPU code is the near field (the CPU's M2L of a level
    # costs the same at any N)
    n = 4000 if (kernel, sigma) == ("gaussian", "mixed") else 1500
    x = rng.random((n, 3)) * 2.0
    alpha = rng.standard_normal((n, 3)) * 1e-3
    sig = 0.02 + 0.03 * rng.random(n) if sigma == "mixed" else np.full(n, sigma)
    y = rng.random((700, 3)) * 2.0
    ysig = np.full(700, 0.05) if sigma == "mixed" else np.full(700, sigma)
    passes = ((None, None), (y, ysig))
    # the regularized kernels' CPU far field (P = 18, three Green's functions) costs
    # seconds per pass at any N: one pass each, the algebraic kernel at other targets,
    # winckelmans at the sources (their near-field formulas treat the self pairs as any
    # other, their far field is one array code with other constants; the algebraic self
    # pairs: test_gpu_symmetric_shares_equal_the_cpu_shares)
    passes = {"algebraic": passes[1:], "winckelmans": passes[:1]}.get(kernel, passes)
    # the same tree on both (the CPU's default stencil is 5³ for the Gaussian); one
    # evaluator per device for both passes
    cpu_fmm = FMM(kernel, tol=1e-6, device="cpu", leaf_size=16, near_radius=1)
    gpu_fmm = FMM(kernel, tol=1e-6, device="gpu", leaf_size=16, near_radius=1)
    for targets, tsig in passes:
        cpu = cpu_fmm.fields(x, alpha, sig, targets, tsig)
        gpu = gpu_fmm.fields(
            *(cp.asarray(a) for a in (x, alpha, sig)),
            None if targets is None else cp.asarray(targets),
            None if tsig is None else cp.asarray(tsig))
        for name in ("u", "psi", "omega"):
            a, b = getattr(cpu, name), getattr(gpu, name)
            if a is None:
                assert b is None
                continue
            b = to_host(b)
            assert np.linalg.norm(b - a) <= 1e-11 * np.linalg.norm(a), name


@pytest.mark.parametrize("kernel, radius", [("gaussian", 1), ("gaussian", 2), ("algebraic", 1)])
def test_gpu_symmetric_shares_equal_the_cpu_shares(kernel, radius):
    """The symmetric pass (p2p_fields over the half stencil, twice beyond the own leaf):
    the same shares as the NumPy stages, and sums equal to the full fields'."""
    import cupy as cp
    rng = np.random.default_rng(2)
    # the algebraic kernel at depth 1 (leaves of 16 of 300 points): the symmetric pass is
    # the near field's, and its far field (P = 18, seconds per pass on the CPU) is
    # test_gpu_fields_equal_the_cpu_fields'
    n = 4000 if kernel == "gaussian" else 300
    x = rng.random((n, 3)) * 2.0
    alpha = rng.standard_normal((n, 3)) * 1e-3
    sig = np.full(n, 0.03)
    opts = dict(tol=1e-6, leaf_size=16, near_radius=radius)
    cpu = FMM(kernel, device="cpu", **opts).fields(x, alpha, sig, symmetric=True)
    fmm = FMM(kernel, device="gpu", **opts)
    args = [cp.asarray(a) for a in (x, alpha, sig)]
    gpu, full = fmm.fields(*args, symmetric=True), fmm.fields(*args)
    for name in ("u", "psi", "omega"):
        a, b = getattr(cpu, name), to_host(getattr(gpu, name))
        assert np.linalg.norm(b - a) <= 1e-11 * np.linalg.norm(a), name
    a_d = args[1]
    for s, f in zip(D.field_sums(a_d, gpu), D.field_sums(a_d, full)):
        assert float(s) == pytest.approx(float(f), rel=1e-12)


@pytest.mark.parametrize("case", ["leapfrog", "ring_ground"])
def test_gpu_diagnostics_fast_equal_the_double_sums(case, monkeypatch):
    sim = make_case(case, device="gpu", progress=False, n_phi=64, layers=7, layer_spacing=0.5,
                    sigma=0.05, method="fmm", tracers_per_ring=16)
    monkeypatch.setattr(S, "DIRECT_DIAGNOSTICS_PAIRS", {"gpu": 0})
    fast = sim.diagnostics()
    monkeypatch.setattr(S, "DIRECT_DIAGNOSTICS_PAIRS", {"gpu": 1 << 60})
    ref = sim.diagnostics()
    assert fast["energy"] == pytest.approx(ref["energy"], rel=1e-6)
    assert fast["enstrophy"] == pytest.approx(ref["enstrophy"], rel=1e-6)
    el = sim.elements
    scale = float(to_host(abs(el.alpha * sim.velocity()[0]).sum()))
    assert abs(fast["helicity"] - ref["helicity"]) <= 1e-6 * scale


def test_gpu_element_rows_equal_the_numpy_rows():
    """diagnostic_row (the elementwise kernel) = element_rows in NumPy, with and without
    fields, and RowSums' values from both."""
    import cupy as cp
    from vortexsim.fmm.fields import Fields
    rng = np.random.default_rng(4)
    n = 5000
    x, alpha = rng.standard_normal((n, 3)) + 30.0, rng.standard_normal((n, 3))
    f = Fields(*(rng.standard_normal((n, 3)) for _ in range(3)))
    ref = np.repeat([0, 2000, 3500], [2000, 1500, 1500])
    d = [cp.asarray(a) for a in (x, alpha, ref)]
    fd = Fields(*(cp.asarray(a) for a in f))
    for fields, fields_d in ((None, None), (f, fd), (f._replace(omega=None),
                                                     fd._replace(omega=None))):
        a = D.element_rows(x, alpha, fields, ref)
        b = to_host(D.element_rows(*d[:2], fields_d, d[2]))
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-12)
    sums = D.RowSums([(0, 2000), (2000, 3500)], [1.0, -2.0], [(0, 0, 1), (1, 0, 0)], n, np)
    sums_d = D.RowSums([(0, 2000), (2000, 3500)], [1.0, -2.0], [(0, 0, 1), (1, 0, 0)], n, cp)
    v, w = sums.finish(sums(x, alpha, f)), sums_d.finish(to_host(sums_d(*d[:2], fd)))
    for key in ("total_vorticity", "linear_impulse", "angular_impulse", "ring_centre",
                "ring_radius", "ring_axis", "field_sums"):
        np.testing.assert_allclose(np.asarray(w[key]), np.asarray(v[key]), rtol=1e-11,
                                   atol=1e-11)


def test_gpu_row_sums_over_many_chunks_match_numpy_and_repeat_bitwise():
    """RowSums on the GPU (row_sums.cu: chunks of each segment, a fixed tree) over more
    elements than one chunk holds, a ring that starts and ends inside chunks: the NumPy
    values, and the same bits on a second call."""
    import cupy as cp
    rng = np.random.default_rng(8)
    n = 300_001
    x, alpha = rng.standard_normal((n, 3)) + 2.0, rng.standard_normal((n, 3))
    args = ([(12_345, 250_000)], [1.5], [(0, 1, 0)], n)
    sums, sums_d = D.RowSums(*args, np), D.RowSums(*args, cp)
    assert sums_d.chunks > 1
    xd, ad = cp.asarray(x), cp.asarray(alpha)
    first, second = to_host(sums_d(xd, ad)), to_host(sums_d(xd, ad))
    np.testing.assert_array_equal(first, second)
    v, w = sums.finish(sums(x, alpha)), sums_d.finish(first)
    for key in ("total_vorticity", "linear_impulse", "angular_impulse", "ring_centre",
                "ring_radius", "ring_axis"):
        np.testing.assert_allclose(np.asarray(w[key]), np.asarray(v[key]), rtol=1e-10,
                                   atol=1e-9)
