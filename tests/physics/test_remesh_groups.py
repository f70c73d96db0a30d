"""Remeshing of element groups onto one lattice, in free space and above a ground plane
(``vortexsim/physics/remesh_groups.py``; ``physics.md``, "Remeshing", "Boundaries").

References kept here: the naive M4′ sum over every node and element (for the labels),
:func:`remesh` of all the elements together (for the strengths) and of the elements with
all their images (for the ground plane), and the direct Biot–Savart sum.
"""
import math

import numpy as np
import pytest

from vortexsim.backend import gpu_available
from vortexsim.cases.rings import vortex_ring
from vortexsim.geometry import GroundPlane, mirror
from vortexsim.model import VortexModel
from vortexsim.geometry.remesh import m4prime, remesh
from vortexsim.diagnostics.integrals import angular_impulse, linear_impulse, total_vorticity
from vortexsim.physics.remesh_groups import remesh_groups
from vortexsim.summation import induced_velocity


def _omega(x, alpha):
    return total_vorticity(alpha)


def _scales(x, alpha):
    """Σ|α|, Σ|x||α|, Σ|x|²|α|: the magnitudes that bound the round-off of Ω, P, A."""
    a, r = np.linalg.norm(alpha, axis=1), np.linalg.norm(x, axis=1)
    return (a.sum(), (r * a).sum(), (r * r * a).sum())


def _assert_moments(x1, a1, x0, a0, rtol=1e-12):
    for f, scale in zip((_omega, linear_impulse, angular_impulse), _scales(x0, a0)):
        np.testing.assert_allclose(f(x1, a1), f(x0, a0), rtol=0, atol=rtol * scale)


def _by_index(r):
    """Rows of a Remeshed sorted by lattice index (i slowest, k fastest)."""
    return np.lexsort(r.index.T[::-1])


def _two_rings(h):
    """Two coaxial rings 1.5 h apart along z (their stencils overlap), groups 0 and 1."""
    x0, a0, _ = vortex_ring(radius=1.0, centre=(0.0, 0.0, 0.0), core=0.1, n_phi=24, layers=1)
    x1, a1, _ = vortex_ring(radius=0.9, centre=(0.0, 0.0, 1.5 * h), core=0.1, n_phi=20,
                            layers=1, circulation=0.7, phase=0.1)
    return (np.concatenate([x0, x1]), np.concatenate([a0, a1]),
            np.repeat([0, 1], [len(x0), len(x1)]))


def _contiguous(labels):
    """Group 0, 1, …, then −1: the labels in slot order never decrease."""
    slot = np.where(labels < 0, labels.max() + 1, labels)
    return bool(np.all(np.diff(slot) >= 0))


# -- free space: one lattice ------------------------------------------------------------

def test_one_lattice_conserves_and_sums_all_elements(rng):
    """Two rings and a few ungrouped elements, threshold 0: Ω, P and A conserved to
    round-off, distinct nodes, strengths = remesh of all elements together, labels
    contiguous in slot order."""
    h = 0.15
    x, alpha, group = _two_rings(h)
    extra = rng.uniform(-1.0, 1.0, (15, 3)), 0.1 * rng.normal(size=(15, 3))
    x, alpha = np.concatenate([x, extra[0]]), np.concatenate([alpha, extra[1]])
    group = np.concatenate([group, np.full(15, -1)])
    r = remesh_groups(x, alpha, group, h, n_groups=2, threshold=0.0)
    _assert_moments(r.x, r.alpha, x, alpha)
    assert np.unique(r.index, axis=0).shape[0] == len(r)               # no two coincide
    np.testing.assert_array_equal(r.x, r.index * h)                    # origin 0
    assert _contiguous(r.group) and set(np.unique(r.group)) == {-1, 0, 1}
    ref = remesh(x, alpha, h, threshold=0.0)
    order = _by_index(r)
    np.testing.assert_array_equal(r.x[order], ref.x)
    np.testing.assert_allclose(r.alpha[order], ref.alpha, rtol=0,
                               atol=1e-14 * np.abs(alpha).sum())
    within = [r.index[r.group == g] for g in (0, 1, -1)]                # lattice order
    for idx in within:
        keys = (idx[:, 0] * 10 ** 6 + idx[:, 1]) * 10 ** 6 + idx[:, 2] + 10 ** 15
        assert np.all(np.diff(keys) > 0)
    np.testing.assert_array_equal(r.sigma, h)
    np.testing.assert_array_equal(r.volume, h ** 3)


def test_one_group_is_remesh_bit_for_bit(rng):
    x, alpha = rng.uniform(-1, 1, (300, 3)), rng.normal(size=(300, 3))
    for threshold in (0.0, 1e-3):
        r = remesh_groups(x, alpha, np.zeros(300, dtype=np.int64), 0.2, threshold=threshold)
        ref = remesh(x, alpha, 0.2, threshold=threshold)
        assert r.x.tobytes() == ref.x.tobytes() and r.alpha.tobytes() == ref.alpha.tobytes()
        assert r.n_dropped == (ref.n_dropped - (ref.n_nodes - r.n_nodes))
        np.testing.assert_array_equal(r.group, 0)


def test_separated_groups_keep_their_own_nodes(rng):
    """Groups more than 4h apart share no node: each keeps exactly the nodes (and bits) of
    its own remesh."""
    h = 0.1
    xa, aa = rng.uniform(0, 1, (80, 3)), rng.normal(size=(80, 3))
    xb, ab = rng.uniform(0, 1, (60, 3)) + [1.5, 0.0, 0.0], rng.normal(size=(60, 3))
    x, alpha = np.concatenate([xb, xa]), np.concatenate([ab, aa])      # group 1 first
    r = remesh_groups(x, alpha, np.repeat([1, 0], [60, 80]), h, threshold=0.0)
    for label, (xs, al) in ((0, (xa, aa)), (1, (xb, ab))):
        own = remesh(xs, al, h, threshold=0.0)
        part = r.group == label
        assert r.x[part].tobytes() == own.x.tobytes()
        assert r.alpha[part].tobytes() == own.alpha.tobytes()
    assert r.group.tolist() == sorted(r.group.tolist())


def _naive_shares(nodes, x, alpha, group, h, order):
    """|α_{n,g}|² per group of ``order`` from the naive sum over every node and element."""
    w = np.prod(m4prime((nodes[:, None, :] - x[None, :, :]) / h), axis=2)
    return np.stack([np.sum((w[:, group == g] @ alpha[group == g]) ** 2, axis=1)
                     for g in order], axis=1)


def test_labels_follow_the_largest_contribution(rng):
    """Overlapping groups: every node takes the group whose own share |α_{n,g}| is the
    largest (naive reference); the strong group wins the shared nodes, a weak one keeps
    the nodes only it reaches."""
    h = 0.2
    x0, a0 = rng.uniform(0, 0.6, (40, 3)), rng.normal(size=(40, 3))
    x1, a1 = rng.uniform(0, 0.6, (40, 3)) + [0.5, 0, 0], 0.05 * rng.normal(size=(40, 3))
    x2, a2 = rng.uniform(0, 0.6, (10, 3)) + [0.25, 0.3, 0], rng.normal(size=(10, 3))
    x, alpha = np.concatenate([x0, x1, x2]), np.concatenate([a0, a1, a2])
    group = np.repeat([0, 1, -1], [40, 40, 10])
    r = remesh_groups(x, alpha, group, h, n_groups=2, threshold=0.0)
    order = (0, 1, -1)
    shares = _naive_shares(r.x, x, alpha, group, h, order)
    expected = np.array(order)[np.argmax(shares, axis=1)]
    top = np.sort(shares, axis=1)
    clear = top[:, -1] - top[:, -2] > 1e-9 * top[:, -1]                # no near-ties
    assert clear.mean() > 0.99
    np.testing.assert_array_equal(r.group[clear], expected[clear])
    # where only groups 0 and 1 reach, the strong group 0 takes the nodes it dominates;
    # the nodes only the weak group 1 reaches stay its own
    s0, s1, s_rest = shares.T
    strong = (s0 > 100 * s1) & (s1 > 0) & (s_rest == 0)
    alone = (s1 > 0) & (s0 == 0) & (s_rest == 0)
    assert strong.sum() >= 5 and (r.group[strong] == 0).all()
    assert alone.sum() >= 5 and (r.group[alone] == 1).all()
    assert _contiguous(r.group)


def test_ties_go_to_the_lower_group_and_ungrouped_lose(rng):
    x, alpha = rng.uniform(0, 1, (20, 3)), rng.normal(size=(20, 3))
    triple = (np.concatenate([x, x, x]), np.concatenate([alpha, alpha, alpha]))
    r = remesh_groups(*triple, np.repeat([2, -1, 1], 20), 0.25, n_groups=3, threshold=0.0)
    np.testing.assert_array_equal(r.group, 1)
    pair = (np.concatenate([x, x]), np.concatenate([alpha, alpha]))
    r = remesh_groups(*pair, np.repeat([-1, 2], 20), 0.25, n_groups=3, threshold=0.0)
    np.testing.assert_array_equal(r.group, 2)


def test_threshold_applies_to_the_merged_nodes(rng):
    """Two groups that nearly cancel: the threshold is relative to max|α| of the sum,
    so the node set is that of remesh of all elements with the same threshold, and the
    kept plus the dropped strength is Σα."""
    x, alpha = rng.uniform(0, 1, (60, 3)), rng.normal(size=(60, 3))
    x2, alpha2 = np.concatenate([x, x]), np.concatenate([alpha, -alpha * (1 - 1e-3)])
    group = np.repeat([0, 1], 60)
    r = remesh_groups(x2, alpha2, group, 0.2, threshold=0.05)
    ref = remesh(x2, alpha2, 0.2, threshold=0.05)
    np.testing.assert_array_equal(r.x[_by_index(r)], ref.x)
    assert r.n_dropped > 0
    np.testing.assert_allclose(r.alpha.sum(axis=0) + r.dropped_alpha, alpha2.sum(axis=0),
                               rtol=0, atol=1e-13 * np.abs(alpha2).sum())


@pytest.mark.parametrize("ground_z", [None, 0.37])
def test_same_bits_for_any_input_order(ground_z, rng):
    h = 0.2
    x, alpha, group = _two_rings(h)
    x = x + [0.0, 0.0, 0.1 + (ground_z or 0.0)]
    x[:5, 2] = ground_z or 0.0                                          # on the plane
    first = remesh_groups(x, alpha, group, h, threshold=1e-6, ground_z=ground_z)
    for _ in range(3):
        p = rng.permutation(len(x))
        again = remesh_groups(x[p], alpha[p], group[p], h, threshold=1e-6, ground_z=ground_z)
        for name in ("x", "alpha", "group", "index"):
            assert getattr(again, name).tobytes() == getattr(first, name).tobytes(), name


def test_bad_input_raises_clearly(rng):
    x, alpha = rng.uniform(0, 1, (10, 3)), rng.normal(size=(10, 3))
    labels = np.zeros(10, dtype=np.int64)
    with pytest.raises(ValueError, match="labels span .* expected -1 .. 0"):
        remesh_groups(x, alpha, np.arange(10), 0.2, n_groups=1)
    with pytest.raises(ValueError, match="labels span -2"):
        remesh_groups(x, alpha, labels - 2, 0.2)
    with pytest.raises(TypeError, match="integer array of shape \\(10,\\)"):
        remesh_groups(x, alpha, np.zeros(10), 0.2)
    with pytest.raises(TypeError, match="integer array of shape \\(10,\\)"):
        remesh_groups(x, alpha, labels[:5], 0.2)
    with pytest.raises(ValueError, match="expected \\(10, 3\\) to match x"):
        remesh_groups(x, alpha[:5], labels, 0.2)
    with pytest.raises(ValueError, match="ground_z must be finite"):
        remesh_groups(x, alpha, labels, 0.2, ground_z=math.nan)
    with pytest.raises(ValueError, match="threshold must be in"):
        remesh_groups(x, alpha, labels, 0.2, threshold=1.0)
    with pytest.raises(ValueError, match="h must be finite and > 0"):
        remesh_groups(x, alpha, labels, 0.0)
    empty = remesh_groups(np.zeros((0, 3)), np.zeros((0, 3)), None, 0.2)
    assert len(empty) == 0 and empty.group.shape == (0,)


# -- the ground plane ---------------------------------------------------------------------

def _near_plane(rng, z0, n=60, reach=0.5):
    """Elements above z = z0, a third of them within 0.1 of it and a few exactly on it."""
    x = rng.uniform(-0.5, 0.5, (n, 3))
    x[:, 2] = z0 + rng.uniform(0.0, reach, n)
    x[: n // 3, 2] = z0 + rng.uniform(0.0, 0.1, n // 3)
    x[:5, 2] = z0
    return x, rng.normal(size=(n, 3))


def test_ground_plane_is_the_remesh_of_elements_and_images(rng):
    """The kept nodes with their images are the remesh of the elements with all their
    images (node by node, to round-off); Ω, P and A of the system with images are
    conserved; no node below the plane; plane nodes hold the normal component only."""
    z0, h = 0.37, 0.1
    x, alpha = _near_plane(rng, z0)
    group = np.repeat([0, 1, -1], [20, 30, 10])
    r = remesh_groups(x, alpha, group, h, n_groups=2, ground_z=z0, threshold=0.0)
    assert (r.x[:, 2] >= z0).all() and (r.index[:, 2] >= 0).all()
    on = r.index[:, 2] == 0
    assert on.sum() > 10 and (r.x[on, 2] == z0).all()
    assert (r.alpha[on, :2] == 0).all() and (r.alpha[on, 2] != 0).all()
    assert _contiguous(r.group)
    # the system with images, before and after
    xi, ai = mirror(x, alpha, z0)
    xs, al = np.concatenate([x, xi]), np.concatenate([alpha, ai])
    ri = mirror(r.x, r.alpha, z0)
    _assert_moments(np.concatenate([r.x, ri[0]]), np.concatenate([r.alpha, ri[1]]), xs, al)
    # node by node: U, the plane at full strength, and mirror(U) against the reference
    ref = remesh(xs, al, h, origin=(0.0, 0.0, z0), threshold=0.0)
    up = ~on
    index = np.concatenate([r.index[up], r.index[on], r.index[up] * [1, 1, -1]])
    strength = np.concatenate([r.alpha[up], 2 * r.alpha[on], r.alpha[up] * [-1, -1, 1]])
    order = np.lexsort(index.T[::-1])
    np.testing.assert_array_equal(index[order], ref.index)
    np.testing.assert_allclose(strength[order], ref.alpha, rtol=0,
                               atol=1e-14 * np.abs(al).sum())
    plane = ref.index[:, 2] == 0                  # the reference's own plane: symmetric
    assert np.abs(ref.alpha[plane, :2]).max() < 1e-14 * np.abs(al).sum()


def _ground_velocity(x, alpha, sigma, targets, z0):
    xs, al, s = GroundPlane(z0).sources(x, alpha, np.full(len(x), sigma))
    u, _ = induced_velocity(xs, al, s, targets, gradient=False, method="direct",
                            device="cpu")
    return u


def test_ground_plane_velocity_converges_with_h(rng):
    """Blobs of one fixed core σ₀ = 0.5 (smooth on the lattice scale) near the plane,
    some on it: the velocity of the remeshed elements (+ images) at points above the plane
    approaches the original's as h → 0.  M4′ reproduces quadratics, so the error of each
    blob's field is O(h³ ∂³u); halving h must divide it by at least 4 (second order at
    the least, third expected).  A wrong plane row (full strength, or tangential parts
    kept) leaves an O(1) error that does not fall."""
    z0, sigma = -0.2, 0.5
    x, alpha = _near_plane(rng, z0, n=40, reach=0.4)
    targets = rng.uniform(-0.6, 0.6, (12, 3))
    targets[:, 2] = z0 + rng.uniform(0.1, 1.0, 12)
    exact = _ground_velocity(x, alpha, sigma, targets, z0)
    errors = []
    for h in (0.2, 0.1, 0.05):
        r = remesh_groups(x, alpha, None, h, ground_z=z0, threshold=0.0)
        u = _ground_velocity(r.x, r.alpha, sigma, targets, z0)
        errors.append(np.abs(u - exact).max() / np.abs(exact).max())
    assert errors[0] < 0.05
    assert errors[1] < errors[0] / 4 and errors[2] < errors[1] / 4, errors


def test_ground_velocity_of_elements_on_the_plane():
    """Elements exactly on the plane (normal strength, as remeshing leaves them) coincide
    with their images: the model accepts them, and its velocity (direct sum through the
    ground plane) is finite and equals the free-space velocity of twice the strengths,
    at points above the plane and at the elements themselves."""
    z0, h = 0.25, 0.2
    g = np.arange(-1, 2) * h
    x = np.stack(np.meshgrid(g, g, [z0], indexing="ij"), axis=-1).reshape(-1, 3)
    alpha = np.zeros_like(x)
    alpha[:, 2] = np.linspace(0.5, 1.5, len(x))
    model = VortexModel((x, alpha, h), dt=0.01, boundary="ground", ground_z=z0,
                        method="direct", device="cpu")
    targets = np.array([[0.05, 0.1, z0 + 0.3], [0.3, -0.2, z0 + 0.05]])
    u, grad = model.velocity(targets, gradient=True)
    u_free, _ = induced_velocity(x, 2 * alpha, h, targets, gradient=False, device="cpu")
    np.testing.assert_allclose(u, u_free, rtol=1e-13, atol=1e-15)
    assert np.isfinite(grad).all()
    u_el, grad_el = model.velocity(gradient=True)
    u_el_free, _ = induced_velocity(x, 2 * alpha, h, None, gradient=False, device="cpu")
    np.testing.assert_allclose(u_el, u_el_free, rtol=1e-13, atol=1e-15)
    assert np.isfinite(grad_el).all() and np.abs(u_el[:, 2]).max() == 0.0


# -- in the model -------------------------------------------------------------------------

def test_model_with_a_ground_plane_remeshes_and_keeps_omega_z(rng):
    """boundary='ground', remesh_every=2: builds, runs 5 steps (remeshed at 2 and 4), no
    element below the plane, and the total Ω_z (conserved by the image system under the
    transpose scheme and by the remeshing) kept to round-off."""
    z0, h = 0.1, 0.1
    x = rng.uniform(-0.1, 0.1, (8, 3))
    x[:, 2] = z0 + rng.uniform(0.0, 0.15, 8)
    x[0, 2] = z0
    alpha = 0.01 * rng.normal(size=(8, 3))
    alpha[:, 2] += 0.01
    model = VortexModel((x, alpha, h), dt=0.02, boundary="ground", ground_z=z0,
                        method="direct", device="cpu", remesh_every=2, remesh_spacing=h,
                        remesh_threshold=0.0)
    omega_z, scale = alpha[:, 2].sum(), np.abs(alpha).sum()
    for _ in range(5):
        model.time_step(model.dt)
    el = model.elements
    assert model.iteration == 5 and len(el) > 8                       # remeshed
    assert (el.x[:, 2] >= z0 - 1e-12).all()
    np.testing.assert_allclose(el.alpha[:, 2].sum(), omega_z, rtol=0, atol=1e-12 * scale)


def test_model_two_rings_pse_free_space_runs():
    """Two ring groups, viscous='pse', nu > 0, remesh_every=2 in free space: builds, runs
    3 steps; after the remeshing no two elements coincide (PSE weighs each node once),
    the groups are contiguous, and Σα is kept (PSE and the remeshing conserve it)."""
    h = 0.2
    x, alpha, labels = _two_rings(h)
    volume = np.full(len(x), h ** 3)
    groups = [{"name": "a", "start": 0, "stop": int((labels == 0).sum())},
              {"name": "b", "start": int((labels == 0).sum()), "stop": len(x)}]
    model = VortexModel((x, alpha, h, volume), groups=groups, dt=0.02, nu=1e-3,
                        viscous="pse", remesh_every=2, remesh_spacing=h,
                        remesh_threshold=0.0, method="direct", device="cpu")
    omega = alpha.sum(axis=0)
    for _ in range(3):
        model.time_step(model.dt)
    el = model.elements
    assert model.iteration == 3 and len(el) != len(x)
    assert np.unique(np.round(el.x / h), axis=0).shape[0] == len(el)
    assert [g.name for g in model.groups] == ["a", "b"]
    assert model.groups[0].stop == model.groups[1].start
    split = model.groups[0].stop
    assert (el.group[:split] == 0).all() and (el.group[split:] == 1).all()
    np.testing.assert_allclose(el.alpha.sum(axis=0), omega, rtol=0,
                               atol=1e-12 * np.abs(alpha).sum())


@pytest.mark.parametrize("kw, name", [
    (dict(remesh_overlap=0.0), "remesh_overlap"), (dict(remesh_overlap=-1.0), "remesh_overlap"),
    (dict(remesh_overlap=math.nan), "remesh_overlap"),
    (dict(remesh_overlap=math.inf), "remesh_overlap"),
    (dict(remesh_threshold=-0.1), "remesh_threshold"),
    (dict(remesh_threshold=1.0), "remesh_threshold"),
    (dict(remesh_threshold=math.nan), "remesh_threshold"),
])
def test_parameter_limits_refuse_bad_overlap_and_threshold(kw, name):
    """The parameter table's limits (check_limits, at construction) refuse an overlap
    ≤ 0 and a threshold outside [0, 1): Remeshing.check need not repeat them."""
    x = np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.0]])
    with pytest.raises(ValueError, match=name):
        VortexModel((x, np.ones((2, 3)), 0.2), dt=0.01, remesh_every=1, remesh_spacing=0.1,
                    device="cpu", **kw)


# -- the GPU: the same code on CuPy -------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("ground_z", [None, 0.37])
def test_cupy_matches_numpy(ground_z, rng):
    import cupy as cp

    x, alpha = _near_plane(rng, ground_z or 0.0, n=3000, reach=1.0)
    group = rng.integers(-1, 3, len(x))
    host = remesh_groups(x, alpha, group, 0.1, n_groups=3, ground_z=ground_z)
    args = (cp.asarray(x), cp.asarray(alpha), cp.asarray(group), 0.1)
    device = remesh_groups(*args, n_groups=3, ground_z=ground_z)
    again = remesh_groups(*args, n_groups=3, ground_z=ground_z)
    np.testing.assert_array_equal(cp.asnumpy(device.x), host.x)
    np.testing.assert_array_equal(cp.asnumpy(device.group), host.group)
    np.testing.assert_allclose(cp.asnumpy(device.alpha), host.alpha, rtol=0,
                               atol=1e-14 * np.abs(alpha).sum())
    for name in ("x", "alpha", "group"):
        assert cp.asnumpy(getattr(device, name)).tobytes() == \
            cp.asnumpy(getattr(again, name)).tobytes()
