"""Remeshing with M4′ (``physics.md``, "Remeshing"): weights, conservation, the periodic
box, third-order convergence, the threshold, errors and determinism.

The reference is the naive sum over every node and element, kept here:
α_n = Σ_p W((x_n − x_p)/h) W((y_n − y_p)/h) W((z_n − z_p)/h) α_p.
"""
import numpy as np
import pytest

from vortexsim.backend import gpu_available
from vortexsim.geometry import MIN_PERIODIC_NODES, periodic_nodes
from vortexsim.geometry.remesh import DEFAULT_THRESHOLD, STENCIL, m4prime, m4prime_stencil, remesh

TWO_PI = 2.0 * np.pi


def _naive(nodes, x, alpha, h, box_length=None):
    """The naive reference: every node against every element (minimum image if periodic)."""
    d = nodes[:, None, :] - x[None, :, :]
    if box_length is not None:
        d -= box_length * np.round(d / box_length)
    return np.prod(m4prime(d / h), axis=2) @ alpha


def _omega(x, alpha):
    return alpha.sum(axis=0)


def _impulse(x, alpha):
    return 0.5 * np.cross(x, alpha).sum(axis=0)


def _angular_impulse(x, alpha):
    return np.cross(x, np.cross(x, alpha)).sum(axis=0) / 3.0


def _particles(rng, n, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, (n, 3)), rng.normal(size=(n, 3))


# -- 1. the kernel and its weights -------------------------------------------------------

def test_m4prime_values_and_support():
    r = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 10.0])
    expected = [1.0, 1 - 5 / 8 + 3 / 16, 0.0, 0.5 * 0.25 * -0.5, 0.0, 0.0, 0.0]
    np.testing.assert_allclose(m4prime(r), expected, rtol=0, atol=1e-16)
    np.testing.assert_array_equal(m4prime(-r), m4prime(r))            # even
    # continuous at |r| = 1 and 2 (both pieces meet), and C¹ there (one-sided slopes)
    eps = 1e-7
    for edge in (1.0, 2.0):
        left, right = m4prime(edge - eps), m4prime(edge + eps)
        assert abs(left - right) < 3 * eps                  # |W′| ≤ 1 near the edges
        slope_left = (m4prime(edge - eps) - m4prime(edge - 2 * eps)) / eps
        slope_right = (m4prime(edge + 2 * eps) - m4prime(edge + eps)) / eps
        assert abs(slope_left - slope_right) < 1e-5


def test_stencil_is_the_kernel_at_the_four_distances(rng):
    tau = rng.random(1000)
    distances = np.stack([1 + tau, tau, 1 - tau, 2 - tau], axis=-1)
    np.testing.assert_allclose(m4prime_stencil(tau), m4prime(distances), rtol=0, atol=2e-16)
    np.testing.assert_array_equal(m4prime_stencil(np.zeros(1)), [[0, 1, 0, 0]])


def test_weights_reproduce_polynomials_to_degree_two_in_1d(rng):
    """Σ_o w_o (c + o)^m h^m = x^m for m = 0, 1, 2 (absolute positions x = (c + τ) h)."""
    tau = rng.random(2000)
    cell = rng.integers(-50, 50, tau.shape)
    h = 0.37
    w = m4prime_stencil(tau)
    nodes = (cell[:, None] + np.array(STENCIL)[None, :]) * h
    x = (cell + tau) * h
    for m in (0, 1, 2):
        exact = x ** m
        error = np.abs((w * nodes ** m).sum(axis=1) - exact).max()
        assert error <= 1e-13 * max(1, np.abs(exact).max())
    # the third moment about the element does not vanish: M4′ is third order, not fourth
    third = (w * (np.array(STENCIL)[None, :] - tau[:, None]) ** 3).sum(axis=1)
    assert np.abs(third).max() > 0.05


def test_weights_reproduce_quadratics_in_3d(rng):
    """One element spreads onto 64 nodes whose weights reproduce 1, x_i and x_i x_j."""
    h = 0.25
    for x in rng.uniform(-2, 2, (20, 3)):
        r = remesh(x[None, :], np.array([[1.0, 0.0, 0.0]]), h, threshold=0.0)
        w, nodes = r.alpha[:, 0], r.x
        assert r.n_nodes == 64 and len(r) == 64
        assert abs(w.sum() - 1) < 1e-14
        np.testing.assert_allclose(w @ nodes, x, rtol=0, atol=1e-14)
        np.testing.assert_allclose(nodes.T @ (w[:, None] * nodes), np.outer(x, x),
                                   rtol=0, atol=1e-13)


# -- 2. free space ----------------------------------------------------------------------

def test_free_space_matches_the_naive_sum_and_conserves(rng):
    x, alpha = _particles(rng, 300)
    h, origin = 0.2, np.array([0.05, -0.3, 0.11])
    r = remesh(x, alpha, h, origin=origin, threshold=0.0)
    assert r.n_dropped == 0 and len(r) == r.n_nodes
    # nodes on the lattice origin + (i, j, k) h
    index = (r.x - origin) / h
    np.testing.assert_allclose(index, np.round(index), rtol=0, atol=1e-12)
    scale = np.abs(alpha).sum()
    assert np.abs(r.alpha - _naive(r.x, x, alpha, h)).max() <= 1e-14 * scale
    # Ω, P and A to round-off, relative to Σ|α|, Σ|α||x|, Σ|α||x|²
    norm_a, norm_x = np.linalg.norm(alpha, axis=1), np.linalg.norm(x, axis=1)
    for moment, weight in ((_omega, 1), (_impulse, norm_x), (_angular_impulse, norm_x ** 2)):
        error = np.abs(moment(r.x, r.alpha) - moment(x, alpha)).max()
        assert error <= 1e-13 * (norm_a * weight).sum(), moment.__name__
    # σ = overlap × h, V = h³, the input dtype
    r2 = remesh(x, alpha, h, origin=origin, threshold=0.0, overlap=1.5)
    np.testing.assert_array_equal(r2.sigma, np.full(len(r2), 1.5 * h))
    np.testing.assert_array_equal(r2.volume, np.full(len(r2), h ** 3))
    assert r2.x.dtype == r2.alpha.dtype == np.float64
    assert all(a is b for a, b in zip(r2.elements, (r2.x, r2.alpha, r2.sigma, r2.volume)))


def test_distant_clusters_remesh_as_if_alone(rng, monkeypatch):
    """Two clusters 100 h apart (a sparse box: the node set by sorting) give each
    cluster's own remesh, bitwise; the dense and the sorted node sets agree bitwise."""
    h = 0.1
    a_x, a_alpha = _particles(rng, 100, 0.0, 0.5)
    b_x, b_alpha = _particles(rng, 100, 10.0, 10.5)
    both = remesh(np.concatenate([a_x, b_x]), np.concatenate([a_alpha, b_alpha]), h,
                  threshold=0.0)
    alone = [remesh(a_x, a_alpha, h, threshold=0.0), remesh(b_x, b_alpha, h, threshold=0.0)]
    for name in ("x", "alpha"):
        joined = np.concatenate([getattr(r, name) for r in alone])
        assert getattr(both, name).tobytes() == joined.tobytes()
    dense = alone[0]
    monkeypatch.setattr("vortexsim.geometry.remesh._DENSE_NODES_PER_CELL", 0)
    by_sort = remesh(a_x, a_alpha, h, threshold=0.0)
    assert by_sort.x.tobytes() == dense.x.tobytes()
    assert by_sort.alpha.tobytes() == dense.alpha.tobytes()


def test_output_sorted_by_lattice_index(rng):
    x, alpha = _particles(rng, 50)
    for kwargs in ({"threshold": 0.0}, {"box_length": 2.0}):
        r = remesh(x, alpha, 0.25, **kwargs)
        index = np.round(r.x / 0.25).astype(np.int64)
        order = np.lexsort(index.T[::-1])                 # i slowest, k fastest
        np.testing.assert_array_equal(order, np.arange(len(r)))
        assert len(np.unique(index, axis=0)) == len(r)


def test_an_element_on_a_node_stays_there():
    """W(0) = 1, W(±1) = W(±2) = 0: one node gets all of the strength, bitwise."""
    h, alpha = 0.125, np.array([[0.3, -1.7, 2.9]])
    x = np.array([[3, -2, 5]]) * h
    r = remesh(x, alpha, h, threshold=0.0)
    assert r.n_nodes == 64 and r.n_dropped == 63 and len(r) == 1
    np.testing.assert_array_equal(r.x, x)
    np.testing.assert_array_equal(r.alpha, alpha)
    np.testing.assert_array_equal(r.dropped_alpha, 0.0)
    p = remesh(x, alpha, h, box_length=1.0)
    assert len(p) == 8 ** 3
    hit = np.flatnonzero(np.any(p.alpha != 0, axis=1))
    np.testing.assert_array_equal(p.x[hit], [[3 * h, 6 * h, 5 * h]])     # −2 wraps to 6
    np.testing.assert_array_equal(p.alpha[hit], alpha)


# -- 3. the periodic box ----------------------------------------------------------------

def test_periodic_box_matches_the_naive_sum_and_conserves_strength(rng):
    L, n = 2.0, 8
    x, alpha = _particles(rng, 200, 0.0, L)
    r = remesh(x, alpha, L / n, box_length=L)
    assert len(r) == r.n_nodes == n ** 3 and r.n_dropped == 0
    grid = np.indices((n, n, n)).reshape(3, -1).T * (L / n)
    np.testing.assert_array_equal(r.x, grid)                    # every node, i·h, i = 0 … n−1
    np.testing.assert_array_equal(r.volume, np.full(n ** 3, (L / n) ** 3))
    scale = np.abs(alpha).sum()
    assert np.abs(r.alpha - _naive(r.x, x, alpha, L / n, box_length=L)).max() <= 1e-14 * scale
    assert np.abs(_omega(r.x, r.alpha) - _omega(x, alpha)).max() <= 1e-13 * scale


def test_periodic_positions_outside_the_box_are_wrapped(rng):
    L, h = 1.0, 0.125
    x, alpha = _particles(rng, 100, 0.0, L)
    shift = rng.integers(-3, 4, x.shape) * L                  # whole boxes, both signs
    inside, outside = remesh(x, alpha, h, box_length=L), remesh(x + shift, alpha, h, box_length=L)
    np.testing.assert_array_equal(outside.x, inside.x)
    assert np.abs(outside.alpha - inside.alpha).max() <= 1e-13 * np.abs(alpha).sum()


def test_periodic_is_free_space_folded_into_the_box(rng):
    """What the box conserves: the free-space remesh (lattice at 0) folded modulo n.

    So Ω is conserved, and P and A are conserved with the nodes at their unfolded
    positions; for elements whose stencils stay inside the box (s ∈ [1, n − 2) on each
    axis) that is P and A as computed in the box.
    """
    L, n = 1.0, 8
    h = L / n
    x, alpha = _particles(rng, 150, -0.2, 1.3)                  # across every face
    periodic = remesh(x, alpha, h, box_length=L)
    free = remesh(x, alpha, h, threshold=0.0)
    index = np.round(free.x / h).astype(np.int64) % n
    folded = np.zeros((n ** 3, 3))
    np.add.at(folded, (index[:, 0] * n + index[:, 1]) * n + index[:, 2], free.alpha)
    assert np.abs(periodic.alpha - folded).max() <= 1e-14 * np.abs(alpha).sum()

    inner, alpha_inner = _particles(rng, 150, 1.0 * h, L - 2.0 * h - 1e-12)
    r = remesh(inner, alpha_inner, h, box_length=L)
    norm_a, norm_x = np.linalg.norm(alpha_inner, axis=1), np.linalg.norm(inner, axis=1)
    for moment, weight in ((_omega, 1), (_impulse, norm_x), (_angular_impulse, norm_x ** 2)):
        error = np.abs(moment(r.x, r.alpha) - moment(inner, alpha_inner)).max()
        assert error <= 1e-13 * (norm_a * weight).sum(), moment.__name__


def test_periodic_shift_by_whole_cells_rolls_the_lattice(rng):
    L, n = 1.0, 8
    h = L / n
    x, alpha = _particles(rng, 80, 0.0, L)
    cells = np.array([3, -1, 5])
    r0 = remesh(x, alpha, h, box_length=L)
    r1 = remesh(x + cells * h, alpha, h, box_length=L)
    rolled = np.roll(r0.alpha.reshape(n, n, n, 3), cells, axis=(0, 1, 2)).reshape(-1, 3)
    assert np.abs(r1.alpha - rolled).max() <= 1e-13 * np.abs(alpha).sum()


# -- 4. third-order convergence on a smooth periodic field -----------------------------

def _field(x):
    X, Y, Z = x.T
    return np.stack([np.sin(TWO_PI * X) * np.cos(TWO_PI * Y),
                     np.cos(TWO_PI * Z) + 0.5 * np.sin(TWO_PI * X),
                     np.sin(TWO_PI * (X + Y + Z))], axis=1)


def _remesh_error(n, displacement):
    """max |α_n/h³ − f(x_n)| for elements carrying f(x_p) V_p on a displaced lattice.

    ``shift``: the lattice (i, j, k) h moved by a constant sub-cell offset;
    ``smooth``: also displaced by 0.3 h sin(2π ξ) (a smooth map ξ → x;
    V_p = h³ det ∂x/∂ξ).
    """
    h = 1.0 / n
    xi = np.indices((n, n, n)).reshape(3, -1).T * h
    x = xi + np.array([0.37, 0.61, 0.23]) * h
    volume = np.full(len(x), h ** 3)
    if displacement == "smooth":
        x += 0.3 * h * np.sin(TWO_PI * xi[:, [1, 2, 0]])
        c = 0.3 * h * TWO_PI * np.cos(TWO_PI * xi[:, [1, 2, 0]])     # ∂x/∂η, ∂y/∂ζ, ∂z/∂ξ
        volume *= 1.0 + c[:, 0] * c[:, 1] * c[:, 2]
    r = remesh(x, _field(x) * volume[:, None], h, box_length=1.0)
    return np.abs(r.alpha / h ** 3 - _field(r.x)).max()


@pytest.mark.parametrize("displacement", ["shift", "smooth"])
def test_smooth_field_converges_at_third_order(displacement):
    errors = [_remesh_error(n, displacement) for n in (8, 16, 32)]
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(orders >= 2.7) and np.all(orders <= 3.8), (errors, orders)


# -- 5. threshold and errors ------------------------------------------------------------

def test_threshold_drops_weak_nodes_and_reports_them(rng):
    x, alpha = _particles(rng, 60, 0.0, 1.0)
    x = np.concatenate([x, [[3.0, 3.0, 3.0]]])                  # a weak element far away
    alpha = np.concatenate([alpha, [[1e-5, 0.0, 0.0]]])
    full = remesh(x, alpha, 0.2, threshold=0.0)
    cut = remesh(x, alpha, 0.2, threshold=1e-3)
    magnitude = np.linalg.norm(cut.alpha, axis=1)
    assert magnitude.min() > 1e-3 * magnitude.max()
    assert cut.n_nodes == full.n_nodes and cut.n_dropped == cut.n_nodes - len(cut) >= 64
    assert not np.any(np.all(np.abs(cut.x - 3.0) < 0.5, axis=1))   # its nodes are gone
    # the kept nodes are the full result's, bitwise; the dropped strength is what is missing
    kept = {tuple(i) for i in np.round(cut.x / 0.2).astype(int)}
    keep = np.array([tuple(i) in kept for i in np.round(full.x / 0.2).astype(int)])
    np.testing.assert_array_equal(full.alpha[keep], cut.alpha)
    np.testing.assert_allclose(cut.dropped_alpha, full.alpha[~keep].sum(axis=0), rtol=0, atol=1e-15)
    np.testing.assert_allclose(cut.dropped_alpha + cut.alpha.sum(axis=0), alpha.sum(axis=0),
                               rtol=0, atol=1e-13)
    np.testing.assert_allclose(cut.dropped_abs, np.linalg.norm(full.alpha[~keep], axis=1).sum(),
                               rtol=1e-14)
    default = remesh(x, alpha, 0.2, threshold=DEFAULT_THRESHOLD)
    assert remesh(x, alpha, 0.2).alpha.tobytes() == default.alpha.tobytes()


def test_empty_input():
    none = np.zeros((0, 3))
    r = remesh(none, none, 0.1)
    assert len(r) == 0 and r.x.shape == (0, 3) and r.sigma.shape == (0,)
    p = remesh(none, none, 0.25, box_length=1.0)
    assert len(p) == 64 and not p.alpha.any()


@pytest.mark.parametrize("kwargs, error, match", [
    ({"h": 0.0}, ValueError, "h must be finite and > 0"),
    ({"h": -0.1}, ValueError, "h must be finite and > 0"),
    ({"h": float("nan")}, ValueError, "h must be finite"),
    ({"h": 0.3, "box_length": 1.0}, ValueError, "not a whole number of lattice spacings"),
    ({"h": 1 / 3, "box_length": 1.0}, ValueError, "at least 4 nodes per side"),
    ({"h": 0.25, "box_length": 1.0, "threshold": 0.0}, ValueError, "free space only"),
    ({"h": 0.25, "box_length": 1.0, "origin": (0, 0, 0)}, ValueError, "free space only"),
    ({"h": 0.1, "box_length": float("inf")}, ValueError, "box_length must be finite"),
    ({"h": 0.1, "threshold": 1.0}, ValueError, r"threshold must be in \[0, 1\)"),
    ({"h": 0.1, "threshold": -1e-3}, ValueError, r"threshold must be in \[0, 1\)"),
    ({"h": 0.1, "overlap": 0.0}, ValueError, "overlap must be finite and > 0"),
    ({"h": 0.1, "origin": (0.0, np.nan, 0.0)}, ValueError, "origin must be 3 finite"),
    ({"h": 1e-300}, ValueError, "beyond 2\\^50 h"),
])
def test_bad_parameters_raise(kwargs, error, match, rng):
    x, alpha = _particles(rng, 5)
    h = kwargs.pop("h")
    with pytest.raises(error, match=match):
        remesh(x, alpha, h, **kwargs)


def test_bad_arrays_raise(rng):
    x, alpha = _particles(rng, 5)
    for bad, name in ((np.nan, "x"), (np.inf, "alpha")):
        xb, ab = x.copy(), alpha.copy()
        (xb if name == "x" else ab)[2, 1] = bad
        with pytest.raises(ValueError, match=f"{name} has non-finite values"):
            remesh(xb, ab, 0.1)
    with pytest.raises(ValueError, match=r"alpha has shape \(4, 3\); expected \(5, 3\)"):
        remesh(x, alpha[:4], 0.1)
    with pytest.raises(ValueError, match="expected \\(N, 3\\)"):
        remesh(x[:, :2], alpha[:, :2], 0.1)
    with pytest.raises(TypeError, match="dtype int64"):
        remesh(x.astype(np.int64), alpha, 0.1)
    with pytest.raises(TypeError, match="pass one dtype"):
        remesh(x, alpha.astype(np.float32), 0.1)


def test_minimum_periodic_lattice():
    assert MIN_PERIODIC_NODES == 4
    assert periodic_nodes(1.0, 0.25) == 4
    assert periodic_nodes(2 * np.pi, 2 * np.pi / 48) == 48       # h = L/n in floating point
    x, alpha = np.array([[0.1, 0.9, 0.55]]), np.array([[1.0, 2.0, 3.0]])
    r = remesh(x, alpha, 0.25, box_length=1.0)                   # 4 distinct nodes per axis
    np.testing.assert_allclose(r.alpha.sum(axis=0), alpha[0], rtol=1e-15)
    assert np.count_nonzero(r.alpha[:, 0]) == 64


def test_float32_stays_float32(rng):
    x, alpha = _particles(rng, 100)
    r = remesh(x.astype(np.float32), alpha.astype(np.float32), 0.2, threshold=0.0)
    assert r.x.dtype == r.alpha.dtype == r.sigma.dtype == r.volume.dtype == np.float32
    r64 = remesh(x, alpha, 0.2, threshold=0.0)
    np.testing.assert_allclose(r.alpha.sum(axis=0), alpha.sum(axis=0), rtol=0, atol=1e-4)
    assert len(r) == len(r64)


# -- 6. determinism ---------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [{"threshold": 0.0}, {"box_length": 2.0}])
def test_deterministic_and_independent_of_the_input_order(kwargs, rng):
    """The same bits for the same input and for every permutation of it."""
    x, alpha = _particles(rng, 400, 0.0, 2.0)
    x[:40] = x[40:80]                                  # elements at the same positions,
    alpha[:20] = alpha[40:60]                          # half of them identical as well
    x[80:120] = np.round(x[80:120] / 0.25) * 0.25      # and elements on nodes
    first, again = remesh(x, alpha, 0.25, **kwargs), remesh(x, alpha, 0.25, **kwargs)
    for name in ("x", "alpha", "sigma", "volume"):
        assert getattr(first, name).tobytes() == getattr(again, name).tobytes()
    for _ in range(3):
        p = rng.permutation(len(x))
        shuffled = remesh(x[p], alpha[p], 0.25, **kwargs)
        assert shuffled.x.tobytes() == first.x.tobytes()
        assert shuffled.alpha.tobytes() == first.alpha.tobytes()


# -- the GPU: the same code on CuPy -----------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("kwargs", [{"threshold": 1e-6}, {"box_length": 2.0}])
def test_cupy_matches_numpy_and_is_deterministic(kwargs, rng):
    import cupy as cp

    x, alpha = _particles(rng, 5000, 0.0, 2.0)
    host = remesh(x, alpha, 0.125, **kwargs)
    device = remesh(cp.asarray(x), cp.asarray(alpha), 0.125, **kwargs)
    again = remesh(cp.asarray(x), cp.asarray(alpha), 0.125, **kwargs)
    np.testing.assert_array_equal(cp.asnumpy(device.x), host.x)
    np.testing.assert_allclose(cp.asnumpy(device.alpha), host.alpha, rtol=0,
                               atol=1e-14 * np.abs(alpha).sum())
    assert cp.asnumpy(device.alpha).tobytes() == cp.asnumpy(again.alpha).tobytes()


def test_simulation_remesh_in_free_space():
    """Simulation.remesh: a ring's elements onto the lattice (threshold 0): Σα and the
    linear and angular impulse kept to round-off, the ring group kept (remeshed on its
    own), and the run goes on (remesh_every in a step) with its ring diagnostics."""
    import vortexsim
    from vortexsim import diagnostics as D
    sim = vortexsim.make_case("single_ring", n_phi=24, layers=1, tracers_per_ring=4,
                              device="cpu", progress=False, remesh_every=1,
                              remesh_spacing=0.1, remesh_threshold=0.0)
    x, alpha = sim.elements.x.copy(), sim.elements.alpha.copy()
    sim.remesh()
    assert len(sim.elements) != len(x) and len(sim.groups) == 1
    assert (sim.groups[0].start, sim.groups[0].stop) == (0, len(sim.elements))
    scale = np.abs(alpha).sum() * (1 + np.abs(x).max())
    for f in (D.total_vorticity, lambda x, a: D.linear_impulse(x, a)):
        before = f(*((alpha,) if f is D.total_vorticity else (x, alpha)))
        after = f(*((sim.elements.alpha,) if f is D.total_vorticity
                    else (sim.elements.x, sim.elements.alpha)))
        np.testing.assert_allclose(after, before, atol=1e-13 * scale)
    np.testing.assert_allclose(D.angular_impulse(sim.elements.x, sim.elements.alpha),
                               D.angular_impulse(x, alpha), atol=1e-13 * scale * np.abs(x).max())
    n = len(sim.elements)
    sim.step()
    assert sim.iteration == 1 and sim.diagnostics()["ring_radius"][0] > 0
    assert len(sim.elements) >= n // 2


def test_simulation_remesh_keeps_each_ring():
    """Two rings remeshed: each on its own, each ring's Σα and impulse kept."""
    import vortexsim
    from vortexsim import diagnostics as D
    sim = vortexsim.make_case("leapfrog", n_phi=16, layers=1, tracers_per_ring=2,
                              device="cpu", progress=False, remesh_every=5,
                              remesh_spacing=0.15, remesh_threshold=0.0)
    before = [(D.total_vorticity(sim.elements.alpha[g.start:g.stop]),
               D.linear_impulse(sim.elements.x[g.start:g.stop],
                                sim.elements.alpha[g.start:g.stop])) for g in sim.groups]
    sim.remesh()
    assert [g.name for g in sim.groups] == ["rear", "front"]
    for (w, p), g in zip(before, sim.groups):
        x, a = sim.elements.x[g.start:g.stop], sim.elements.alpha[g.start:g.stop]
        np.testing.assert_allclose(D.total_vorticity(a), w, atol=1e-13 * np.abs(a).sum())
        np.testing.assert_allclose(D.linear_impulse(x, a), p, atol=1e-13 * np.abs(a).sum())
