"""The slab decomposition of the periodic lattice (vortexsim.geometry.slab): the split of
the planes, the slab FFT against the whole lattice's rfft3/irfft3 on 1, 2 and 3 ranks
(threads playing ranks; slabs of equal and unequal width), its wave numbers, one alltoall
per transform, and the ghost-plane exchanges against the periodic lattice."""
import itertools

import numpy as np
import pytest
from thread_ranks import on_ranks  # tests/thread_ranks.py

from vortexsim.backend import SingleProcess
from vortexsim.geometry.lattice_modes import irfft3, rfft3, wavenumbers
from vortexsim.geometry.slab import (
    GHOST_ABOVE,
    GHOST_BELOW,
    SlabFFT,
    Slabs,
    add_ghost_planes,
    with_ghost_planes,
)


@pytest.mark.parametrize("n", [1, 4, 7, 16, 17])
@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_the_slabs_cover_the_planes_once_in_order_and_evenly(n, size):
    if size > n:
        with pytest.raises(ValueError, match="cannot be split"):
            Slabs(n, size)
        return
    slabs = Slabs(n, size)
    bounds = slabs.bounds
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    widths = [slabs.width(r) for r in range(size)]
    assert max(widths) - min(widths) <= 1 and min(widths) == slabs.thinnest == n // size
    assert widths == sorted(widths, reverse=True)             # the wider first
    owner = slabs.owner(np.arange(n))
    assert owner.tolist() == [r for r in range(size) for _ in range(slabs.width(r))]


def test_the_slabs_refuse_bad_arguments():
    with pytest.raises(TypeError, match="integer"):
        Slabs(8.0, 2)
    with pytest.raises(ValueError, match="at least 1"):
        Slabs(0, 1)
    with pytest.raises(IndexError):
        Slabs(8, 2)[2]


def _split(n, size, f):
    """[f(SlabFFT of rank r)] over ``size`` thread ranks (SingleProcess for one)."""
    if size == 1:
        return [f(SlabFFT(n, SingleProcess(), np))]
    return on_ranks(size, lambda comm: f(SlabFFT(n, comm, np)))


@pytest.mark.parametrize("n", [8, 9, 10])
@pytest.mark.parametrize("size", [1, 2, 3])
def test_the_slab_fft_is_the_whole_lattices_fft(n, size):
    """forward: each rank's κ_y planes of rfft3 of the whole field; inverse of any half
    spectrum (also one that is not Hermitian on its κ_z = 0 and Nyquist planes): each
    rank's x-planes of irfft3; both to round-off."""
    rng = np.random.default_rng(n * 10 + size)
    field = rng.standard_normal((n, n, n))
    modes = rng.standard_normal((n, n, n // 2 + 1)) \
        + 1j * rng.standard_normal((n, n, n // 2 + 1))
    want_modes, want_field = rfft3(field, np), irfft3(modes, n, np)

    def work(fft):
        (i0, i1), (j0, j1) = fft.x_planes, fft.y_planes
        got = fft.forward(np.ascontiguousarray(field[i0:i1]))
        assert got.shape == fft.spectral_shape == (n, j1 - j0, n // 2 + 1)
        back = fft.inverse(np.ascontiguousarray(modes[:, j0:j1]))
        assert back.shape == fft.real_shape == (i1 - i0, n, n)
        round_trip = fft.inverse(got)
        return (np.abs(got - want_modes[:, j0:j1]).max(),
                np.abs(back - want_field[i0:i1]).max(),
                np.abs(round_trip - field[i0:i1]).max())
    errors = np.array(_split(n, size, work)).max(axis=0)
    assert errors[0] <= 1e-13 * np.abs(want_modes).max()
    assert errors[1] <= 1e-13 * np.abs(want_field).max()
    assert errors[2] <= 1e-13 * np.abs(field).max()


@pytest.mark.parametrize("derivative", [False, True])
def test_the_slab_wave_numbers_are_the_lattices_cut_along_ky(derivative):
    n, box = 10, 3.0
    want = wavenumbers(n, box, np, derivative=derivative)
    parts = _split(n, 3, lambda fft: fft.wavenumbers(box, derivative=derivative))
    for r, (kx, ky, kz) in enumerate(parts):
        j0, j1 = Slabs(n, 3)[r]
        assert kx.shape == (n, 1, 1) and ky.shape == (1, j1 - j0, 1)
        np.testing.assert_array_equal(kx, want[0])
        np.testing.assert_array_equal(ky, want[1][:, j0:j1])
        np.testing.assert_array_equal(kz, want[2])
    ky = np.concatenate([p[1] for p in parts], axis=1)
    assert (ky[0, n // 2, 0] == 0.0) == derivative


class Counting(SingleProcess):
    """One process that counts its alltoall calls."""

    def __init__(self):
        self.calls = 0

    def alltoall(self, parts):
        self.calls += 1
        return super().alltoall(parts)


def test_one_alltoall_per_transform():
    comm = Counting()
    fft = SlabFFT(8, comm, np)
    fft.inverse(fft.forward(np.ones((8, 8, 8))))
    assert comm.calls == 2


def test_a_field_of_the_wrong_shape_is_refused():
    fft = SlabFFT(8, SingleProcess(), np)
    with pytest.raises(ValueError, match="expected this rank's slab"):
        fft.forward(np.ones((4, 8, 8)))
    with pytest.raises(ValueError, match="half spectrum"):
        fft.inverse(np.ones((8, 8, 8), complex))


def _fold(blocks, slabs):
    """The periodic lattice (C, n, n, n) of the ranks' blocks (C, n_x + 3, n, n) (planes
    i0 − 1 … i1 + 1), added plane by plane modulo n."""
    n = slabs.n
    total = np.zeros((blocks[0].shape[0], n, n, n))
    for r, block in enumerate(blocks):
        i0, _ = slabs[r]
        for a in range(block.shape[1]):
            total[:, (i0 - GHOST_BELOW + a) % n] += block[:, a]
    return total


@pytest.mark.parametrize("n, size", [(4, 1), (8, 2), (9, 2), (7, 3), (6, 3), (11, 4)])
def test_the_ghost_planes_go_to_their_owners_and_come_back(n, size):
    """add_ghost_planes gives each rank its planes of the periodic fold of all blocks
    (to round-off: at most three addends per node; the same bits on every run);
    with_ghost_planes gives each rank the planes i0 − 1 … i1 + 1 (mod n) of the field, bit
    for bit; slabs of 2 planes, the thinnest allowed, included."""
    slabs = Slabs(n, size)
    rng = np.random.default_rng(n + size)
    blocks = [rng.standard_normal((3, slabs.width(r) + 3, n, n)) for r in range(size)]
    field = rng.standard_normal((2, n, n, n))
    folded = _fold(blocks, slabs)

    def work(comm):
        i0, i1 = slabs[comm.rank]
        own = add_ghost_planes(blocks[comm.rank], slabs, comm)
        block = with_ghost_planes(np.ascontiguousarray(field[:, i0:i1]), slabs, comm)
        again = add_ghost_planes(blocks[comm.rank], slabs, comm)
        assert own.tobytes() == again.tobytes()
        return own, block
    results = [work(SingleProcess())] if size == 1 else on_ranks(size, work)
    for r, (own, block) in enumerate(results):
        i0, i1 = slabs[r]
        np.testing.assert_allclose(own, folded[:, i0:i1], rtol=0, atol=1e-15 * 8)
        planes = [(i % n) for i in range(i0 - GHOST_BELOW, i1 + GHOST_ABOVE)]
        np.testing.assert_array_equal(block, field[:, planes])


def test_slabs_thinner_than_the_ghosts_are_refused():
    slabs = Slabs(5, 3)                                        # widths 2, 2, 1

    def work(comm):
        with pytest.raises(ValueError, match="n ≥ 6 on 3 ranks"):
            with_ghost_planes(np.zeros((3, slabs.width(comm.rank), 5, 5)), slabs, comm)
        return True
    assert on_ranks(3, work) == [True] * 3
