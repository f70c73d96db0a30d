"""M4′ transfers on one slab of the periodic lattice with its ghost planes
(vortexsim.geometry.m4_slab) against the periodic transfers of the whole lattice
(vortexsim.geometry.m4_cpu): P2M's blocks folded onto the lattice, M2P of the same field
bit for bit, the cells, ownership and its refusal."""
import numpy as np
import pytest

from vortexsim.geometry import m4_cpu, m4_slab
from vortexsim.geometry.slab import GHOST_BELOW, Slabs

BOX = 2.0


def _points(rng, count, n, h):
    """Points anywhere in the box, on and beside the slab boundaries of every plane and
    beyond the box on both sides (wrapped by the transfers)."""
    x = rng.random((count, 3)) * BOX
    planes = rng.integers(0, n, count // 3)
    x[:count // 3, 0] = planes * h + rng.choice([0.0, 1e-13, -1e-13, 0.5 * h], planes.size)
    x[count // 3:count // 2] += BOX * rng.choice([-1.0, 1.0], (count // 2 - count // 3, 3))
    return x


@pytest.mark.parametrize("n, size", [(8, 1), (8, 2), (9, 3), (10, 4)])
def test_the_slabs_p2m_folds_onto_the_periodic_p2m_and_m2p_is_its_bits(n, size):
    rng = np.random.default_rng(n * size)
    h = BOX / n
    x = _points(rng, 400, n, h)
    alpha = rng.standard_normal((400, 3))
    field = rng.standard_normal((3, n, n, n))
    slabs = Slabs(n, size)
    owner = slabs.owner(np.floor(x[:, 0] / h).astype(np.int64) % n)
    whole = m4_cpu.periodic_p2m(x, alpha, n, h, component_major=True)
    whole_u = m4_cpu.periodic_m2p(field, x, n, h)
    folded = np.zeros_like(whole)
    for r in range(size):
        i0, i1 = slabs[r]
        mine = owner == r
        np.testing.assert_array_equal(mine, m4_slab.owned(x, n, h, i0, i1))
        block = m4_slab.slab_p2m(x[mine], alpha[mine], n, h, i0, i1)
        assert block.shape == (3, i1 - i0 + 3, n, n)
        for a in range(block.shape[1]):
            folded[:, (i0 - GHOST_BELOW + a) % n] += block[:, a]
        planes = [i % n for i in range(i0 - 1, i1 + 2)]
        u = m4_slab.slab_m2p(np.ascontiguousarray(field[:, planes]), x[mine], n, h, i0, i1)
        np.testing.assert_array_equal(u, whole_u[mine])
    np.testing.assert_allclose(folded, whole, rtol=0, atol=1e-13 * np.abs(whole).max())


def test_the_block_cells_and_the_weights_reuse():
    n, h, i0, i1 = 8, BOX / 8, 2, 5
    x = np.array([[2 * h, 0.0, 0.0], [5 * h - 1e-12, -1e-300, BOX], [2 * h - BOX, 3.3 * h,
                                                                       7.9 * h]])
    cell, tau = m4_slab.block_cells(x, n, h, i0)
    assert cell[:, 0].tolist() == [1, 3, 1]                   # planes 2, 4, 2 of [2, 5)
    assert cell[1, 1:].tolist() == [7, 0] and cell[2, 1:].tolist() == [3, 7]
    np.testing.assert_array_equal(tau, x / h - np.floor(x / h))
    weights = m4_slab.slab_weights(x, n, h, i0, i1)
    alpha = np.ones((3, 3))
    np.testing.assert_array_equal(m4_slab.slab_p2m(x, alpha, n, h, i0, i1, weights=weights),
                                  m4_slab.slab_p2m(x, alpha, n, h, i0, i1))
    out = np.zeros((3, 3, 3))
    fields = np.random.default_rng(0).standard_normal((3, i1 - i0 + 3, n, n))
    m4_slab.slab_m2p(fields, x, n, h, i0, i1, out=out[:, 1, :], weights=weights)
    np.testing.assert_array_equal(out[:, 1, :], m4_slab.slab_m2p(fields, x, n, h, i0, i1))
    assert not out[:, 0].any() and not out[:, 2].any()


def test_points_of_another_slab_are_refused():
    n, h = 8, BOX / 8
    x = np.array([[0.5 * h, 0.1, 0.1], [4.5 * h, 0.1, 0.1]])
    with pytest.raises(ValueError, match="1 of the 2 particles lie outside this rank's slab"):
        m4_slab.slab_p2m(x, np.ones((2, 3)), n, h, 0, 4)
    with pytest.raises(ValueError, match="1 of the 2 targets"):
        m4_slab.slab_m2p(np.zeros((3, 7, n, n)), x, n, h, 0, 4)
    with pytest.raises(ValueError, match=r"expected \(3, 7, 8, 8\)"):
        m4_slab.slab_m2p(np.zeros((3, 4, n, n)), x[:1], n, h, 0, 4)
