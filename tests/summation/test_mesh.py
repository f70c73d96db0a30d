"""The particle-mesh solve of the periodic box against exact fields and the spectral sum."""
import numpy as np
import pytest

from vortexsim.kernels.cutoff import gaussian_blob_transform
from vortexsim.summation.mesh import MeshSolve
from vortexsim.summation.spectral import SpectralSum

BOX = 2 * np.pi


def _taylor_green(n):
    """Lattice nodes (n³, 3), α = ω h³ of the Taylor–Green field, and its exact u and ∇u."""
    h = BOX / n
    g = np.arange(n) * h
    x, y, z = (a.ravel() for a in np.meshgrid(g, g, g, indexing="ij"))
    sx, cx, sy, cy, sz, cz = np.sin(x), np.cos(x), np.sin(y), np.cos(y), np.sin(z), np.cos(z)
    omega = np.stack([-cx * sy * sz, -sx * cy * sz, 2 * sx * sy * cz], axis=1)
    u = np.stack([sx * cy * cz, -cx * sy * cz, 0 * x], axis=1)
    grad = np.zeros((x.size, 3, 3))
    grad[:, 0] = np.stack([cx * cy * cz, -sx * sy * cz, -sx * cy * sz], axis=1)
    grad[:, 1] = np.stack([sx * sy * cz, -cx * cy * cz, cx * sy * sz], axis=1)
    return np.stack([x, y, z], axis=1), omega * h ** 3, u, grad


@pytest.mark.parametrize("order", [2, 4, 6])
def test_taylor_green_on_the_lattice_is_the_smoothed_exact_field(order):
    """Elements on the nodes: the mesh solve gives ζ̂_σ(k) times the exact u and ∇u of the
    one mode |k|² = 3, to round-off, for every Gaussian order."""
    n = 16
    sigma = BOX / n
    x, alpha, u, grad = _taylor_green(n)
    solve = MeshSolve(BOX, n, sigma, order=order)
    u_m, g_m = solve.evaluate(x, alpha)
    smooth = gaussian_blob_transform(0.5 * sigma ** 2 * 3.0, order, np)
    np.testing.assert_allclose(u_m, smooth * u, atol=1e-12)
    np.testing.assert_allclose(g_m, smooth * grad, atol=1e-12)


def _random_field(n_particles, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n_particles, 3)) * BOX
    alpha = rng.normal(size=(n_particles, 3)) * 1e-2
    alpha -= alpha.mean(axis=0)                  # the box needs Σ α = 0
    return x, alpha


def test_off_the_lattice_the_error_against_the_spectral_sum_falls_with_h():
    """Scattered blobs of a fixed core: the mesh solve approaches the spectral sum (the
    float64 reference, tol 1e-10) as the lattice refines (P2M and M4′'s M2P smooth a
    mode by 1 − O((kh)²)): the relative L2 error of u falls at least 3× per halving of h."""
    x, alpha = _random_field(400)
    targets = np.random.default_rng(1).random((200, 3)) * BOX
    sigma = 0.6
    # at targets apart from the elements (at an element the spectral sum leaves its own
    # blob out of ∇u; the mesh solve does not know which target is which element)
    exact, exact_grad = SpectralSum(BOX, sigma, 1e-10).evaluate(x, alpha, targets)
    errors = []
    for n in (16, 32):
        u, grad = MeshSolve(BOX, n, sigma).evaluate(x, alpha, targets)
        errors.append((np.linalg.norm(u - exact) / np.linalg.norm(exact),
                       np.linalg.norm(grad - exact_grad) / np.linalg.norm(exact_grad)))
    assert errors[1][0] < errors[0][0] / 3 and errors[1][1] < errors[0][1] / 3
    assert errors[1][0] < 0.02


def test_mesh_solve_is_deterministic_and_order_free():
    """Two evaluations are bitwise equal; a permuted set at the same targets agrees to
    round-off (the input's order enters P2M's sums; M2P is per target)."""
    x, alpha = _random_field(300, seed=3)
    targets = np.random.default_rng(4).random((50, 3)) * BOX
    solve = MeshSolve(BOX, 16, 0.5, order=6)
    first = solve.evaluate(x, alpha, targets)
    again = solve.evaluate(x, alpha, targets)
    perm = np.random.default_rng(5).permutation(len(x))
    permuted = solve.evaluate(x[perm], alpha[perm], targets)
    for a, b, c in zip(first, again, permuted):
        assert a.tobytes() == b.tobytes()
        np.testing.assert_allclose(c, a, rtol=0, atol=1e-13 * np.abs(a).max())


def test_cpu_transfers_match_the_remesh_in_chunks(monkeypatch):
    """The sparse M4′ transfers of the CPU (geometry.m4_cpu), in chunks of 7 points:
    P2M is the periodic remesh (positions outside the box wrapped) to round-off, M2P of
    a field is its per-point 64-node sum, and M2P is the adjoint of P2M
    (⟨P2M α, F⟩ = ⟨α, M2P F⟩)."""
    from vortexsim.geometry import m4_cpu
    from vortexsim.geometry.remesh import remesh
    monkeypatch.setattr(m4_cpu, "CHUNK", 7)
    n, h = 12, BOX / 12
    x, alpha = _random_field(100, seed=8)
    x[:20] -= BOX
    nodes = m4_cpu.periodic_p2m(x, alpha, n, h)
    np.testing.assert_allclose(nodes, remesh(x, alpha, h, box_length=BOX).alpha, rtol=0,
                               atol=1e-15 * np.abs(alpha).sum())
    fields = np.random.default_rng(9).normal(size=(3, n, n, n))
    u = m4_cpu.periodic_m2p(fields, x, n, h)
    assert u.shape == (100, 3)
    np.testing.assert_allclose(np.sum(nodes * fields.reshape(3, -1).T), np.sum(alpha * u),
                               rtol=1e-13)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [16, 12])
def test_cupy_matches_numpy(n):
    """The GPU's fused P2M and M2P gathers (geometry.m4_gpu) and cuFFT against the NumPy
    remesh, M2P and scipy.fft: elements and targets partly outside the box (wrapped), an
    odd lattice size; the same bits on a second call."""
    cp = pytest.importorskip("cupy")
    x, alpha = _random_field(300, seed=6)
    x[:50] += BOX * np.array([1.0, -1.0, 2.0])
    targets = np.random.default_rng(7).random((200, 3)) * 3 * BOX - BOX
    cpu = MeshSolve(BOX, n, 0.5, order=6).evaluate(x, alpha, targets)
    solve = MeshSolve(BOX, n, 0.5, order=6, xp=cp)
    gpu = solve.evaluate(cp.asarray(x), cp.asarray(alpha), cp.asarray(targets))
    again = solve.evaluate(cp.asarray(x), cp.asarray(alpha), cp.asarray(targets))
    for a, b, c in zip(cpu, gpu, again):
        scale = np.abs(a).max()
        np.testing.assert_allclose(cp.asnumpy(b), a, rtol=0, atol=1e-12 * scale)
        assert cp.asnumpy(b).tobytes() == cp.asnumpy(c).tobytes()


@pytest.mark.gpu
def test_cupy_on_the_nodes_matches_numpy():
    """The solve on the lattice nodes (a step's first stage) on CuPy and NumPy: the
    Taylor–Green field to round-off."""
    cp = pytest.importorskip("cupy")
    n = 16
    x, alpha, _, _ = _taylor_green(n)
    omega = np.ascontiguousarray(alpha.T).reshape(3, n, n, n) / (BOX / n) ** 3
    cpu = MeshSolve(BOX, n, BOX / n, order=6).on_nodes(omega)
    gpu = MeshSolve(BOX, n, BOX / n, order=6, xp=cp).on_nodes(cp.asarray(omega))
    for a, b in zip(cpu, gpu):
        np.testing.assert_allclose(cp.asnumpy(b), a, rtol=0, atol=1e-13)


def _taylor_green_run(method, steps=4):
    import vortexsim
    sim = vortexsim.make_case("taylor_green", n=16, method=method, device="cpu",
                              progress=False)
    sim.run(steps=steps)
    return sim


def test_a_taylor_green_run_with_the_mesh_follows_the_spectral_sum():
    """Four RK steps of Taylor–Green at 16³ (remeshed every step): the particle-mesh
    run's elements and lattice energy stay within the solve's error of the spectral run
    (the elements start and end each step on the lattice, where the mesh solve is the
    lattice's own Fourier sum), and two mesh runs are bitwise equal."""
    mesh, spectral = _taylor_green_run("mesh"), _taylor_green_run("spectral")
    a, b = mesh.model.elements, spectral.model.elements
    scale = np.abs(b.alpha).max()
    assert np.abs(a.alpha - b.alpha).max() < 1e-3 * scale
    e_mesh = mesh.diagnostics()["lattice_energy"]
    e_spec = spectral.diagnostics()["lattice_energy"]
    assert e_mesh == pytest.approx(e_spec, rel=1e-3)
    again = _taylor_green_run("mesh")
    assert again.model.elements.alpha.tobytes() == a.alpha.tobytes()


def test_a_mesh_run_restarts_bitwise():
    """Two steps, a state dict, two more steps from it in a new simulation: the same bits
    as four steps in one go (the first stage of each step sums on the lattice by a
    function of the iteration alone)."""
    import vortexsim
    whole = _taylor_green_run("mesh", steps=4)
    half = _taylor_green_run("mesh", steps=2)
    state = half.model.state_dict()
    again = vortexsim.make_case("taylor_green", n=16, method="mesh", device="cpu",
                                progress=False)
    again.load_state_dict(state)
    again.run(steps=2)
    assert again.model.elements.alpha.tobytes() == whole.model.elements.alpha.tobytes()
    assert again.model.elements.x.tobytes() == whole.model.elements.x.tobytes()


@pytest.mark.parametrize("order", [2, 6])
def test_field_sums_are_the_spectral_sums_of_the_lattice_modes(order):
    """The diagnostics' field sums of the mesh (its lattice modes, MeshSolve.field_sums)
    against the spectral sum's (the float64 reference, tol 1e-10) for three modes on the
    16³ lattice: E, Ω₂, ½∫|u|² and ∫|∇×u|² (the blob field smoothed twice) agree to
    1e-9, the particle sums (smoothed once, where the series' aliases of the lattice
    modes, which the mesh leaves out, weigh e^{−|q|²σ²/2} ≥ e^{−π²/2}) to 1e-4."""
    n = 16
    h = BOX / n
    x, _, _, _ = _taylor_green(n)
    rng = np.random.default_rng(order)
    omega = np.zeros((n ** 3, 3))
    for kv in ((1, 0, 0), (0, 2, 1), (1, 1, 1)):
        kv = np.array(kv, dtype=float)
        a = rng.normal(size=3)
        a -= kv * (a @ kv) / (kv @ kv)                       # solenoidal
        omega += np.cos(x @ kv + 6 * rng.random())[:, None] * a[None, :]
    lattice = np.ascontiguousarray(omega.T).reshape(3, n, n, n)
    mesh = MeshSolve(BOX, n, h, order=order).field_sums(lattice)
    ref = SpectralSum(BOX, h, 1e-10, order=order).field_sums(x, omega * h ** 3)
    for key in ("energy", "enstrophy", "kinetic_energy", "curl_enstrophy"):
        assert mesh[key] == pytest.approx(ref[key], rel=1e-9), key
    for key in ("particle_energy", "particle_enstrophy"):
        assert mesh[key] == pytest.approx(ref[key], rel=1e-4), key
    assert abs(mesh["helicity"]) < 1e-9 * mesh["energy"]
