"""The solenoidal projection, the lattice diffusion and the column mean on x-slabs over
ranks (vortexsim.physics.slab_lattice) against the one-process project_solenoidal,
diffuse_lattice and mean: 1, 2 and 3 ranks (threads playing ranks), slabs of equal and
unequal width (n = 8, 9), each rank's rows to 1e-13 of the field's largest value; the
gathered projection divergence-free with zero sum; the mean the same bits on every rank;
the refusals; the CuPy path (GPU only)."""
import numpy as np
import pytest
from thread_ranks import on_ranks  # tests/thread_ranks.py

from vortexsim.backend import SingleProcess
from vortexsim.geometry.slab import SlabFFT
from vortexsim.physics.lattice_viscosity import diffuse_lattice
from vortexsim.physics.projection import divergent_fraction, project_solenoidal
from vortexsim.physics.slab_lattice import (
    diffuse_slab,
    project_solenoidal_slab,
    slab_column_mean,
)

#: a box that is not 2π, so that the diffusion's k = 2π κ / L is tested
BOX = 1.7
NU, TAU = 0.05, 0.02
TOLERANCE = 1e-13


def _field(n, seed):
    """Random lattice strengths (n³, 3) with a mean and a large divergent part."""
    return np.random.default_rng(seed).standard_normal((n ** 3, 3)) + 0.3


def _rows(alpha, fft):
    """This rank's rows of the whole lattice's ``alpha``."""
    i0, i1 = fft.x_planes
    n = fft.n
    return fft.xp.ascontiguousarray(fft.xp.asarray(alpha[i0 * n * n:i1 * n * n]))


def _on(size, n, work, xp=np):
    """[work(SlabFFT of rank r)] over ``size`` thread ranks (SingleProcess for one)."""
    if size == 1:
        return [work(SlabFFT(n, SingleProcess(), xp))]
    return on_ranks(size, lambda comm: work(SlabFFT(n, comm, xp)))


def _relative(got, want, whole):
    """The largest difference of ``got`` and ``want`` over the largest value of ``whole``."""
    return float(np.abs(got - want).max() / np.abs(whole).max())


def _compare(size, n, seed, xp=np):
    """Every rank's projected and diffused rows against the same rows of the whole
    lattice's; the gathered projection.  Returns (worst projection error, worst
    diffusion error, the gathered projection) relative to the largest value."""
    alpha = _field(n, seed)
    want_p = project_solenoidal(alpha, n)
    want_d = diffuse_lattice(alpha, n, BOX, NU, TAU)

    def work(fft):
        i0, i1 = fft.x_planes
        rows = slice(i0 * n * n, i1 * n * n)
        mine = _rows(alpha, fft)
        p = project_solenoidal_slab(mine, fft)
        d = diffuse_slab(mine, fft, BOX, NU, TAU)
        assert p.shape == d.shape == mine.shape and p.dtype == d.dtype == mine.dtype
        assert type(p) is type(mine) and type(d) is type(mine)
        p, d = (np.asarray(a.get() if hasattr(a, "get") else a) for a in (p, d))
        return _relative(p, want_p[rows], want_p), _relative(d, want_d[rows], want_d), p
    out = _on(size, n, work, xp)
    return (max(o[0] for o in out), max(o[1] for o in out),
            np.concatenate([o[2] for o in out], axis=0))


@pytest.mark.parametrize("n", [8, 9])
@pytest.mark.parametrize("size", [1, 2, 3])
def test_each_ranks_rows_are_the_whole_lattices(n, size):
    """n = 8 on 3 ranks and n = 9 on 2 split unevenly; each rank's projected and diffused
    rows are the one-process function's to round-off."""
    error_p, error_d, projected = _compare(size, n, seed=10 * n + size)
    assert error_p <= TOLERANCE
    assert error_d <= TOLERANCE
    assert projected.shape == (n ** 3, 3)


@pytest.mark.parametrize("n, size", [(8, 2), (9, 3)])
def test_the_gathered_projection_is_solenoidal_with_zero_sum(n, size):
    alpha = _field(n, seed=n)
    assert divergent_fraction(alpha, n) > 0.2
    _, _, projected = _compare(size, n, seed=n)
    assert divergent_fraction(projected, n) <= 1e-25
    assert np.abs(projected.sum(axis=0)).max() <= 1e-13 * np.abs(alpha).sum()


@pytest.mark.parametrize("n, size", [(8, 1), (8, 3), (9, 2)])
def test_the_mean_is_the_whole_lattices_and_the_same_on_every_rank(n, size):
    """slab_column_mean is alpha.mean(axis=0) to round-off, with the same bits on every
    rank; subtracted after diffuse_slab, it gives LatticeDiffusion's half step."""
    alpha = _field(n, seed=3 * n + size)
    want_mean = alpha.mean(axis=0)
    want_step = diffuse_lattice(alpha, n, BOX, NU, TAU)
    want_step -= want_step.mean(axis=0)

    def work(fft):
        mine = _rows(alpha, fft)
        mean = slab_column_mean(mine, n, fft.communicator)
        step = diffuse_slab(mine, fft, BOX, NU, TAU)
        step -= slab_column_mean(step, n, fft.communicator)
        return mean, step
    out = _on(size, n, work)
    means = [m for m, _ in out]
    assert all(m.shape == (3,) and m.dtype == alpha.dtype for m in means)
    assert np.abs(means[0] - want_mean).max() <= 1e-15
    assert len({m.tobytes() for m in means}) == 1
    step = np.concatenate([s for _, s in out], axis=0)
    assert np.abs(step - want_step).max() <= TOLERANCE * np.abs(want_step).max()
    assert np.abs(step.sum(axis=0)).max() <= 1e-13 * np.abs(alpha).sum()


def test_no_diffusion_returns_the_strengths_themselves():
    n = 8

    def work(fft):
        mine = _rows(_field(n, seed=1), fft)
        return (diffuse_slab(mine, fft, BOX, 0.0, TAU) is mine
                and diffuse_slab(mine, fft, BOX, NU, 0.0) is mine)
    assert on_ranks(2, lambda comm: work(SlabFFT(n, comm, np))) == [True, True]


def test_bad_arguments_are_refused_on_every_rank():
    """A slab of the wrong shape (the whole lattice, one column, one plane too few) and bad
    ν, τ or box: ValueError on every rank before any communication."""
    n = 9
    alpha = _field(n, seed=2)

    def work(fft):
        mine = _rows(alpha, fft)
        bad = [alpha, mine[:, :2], mine[n * n:], mine.reshape(-1)]
        for a in bad:
            with pytest.raises(ValueError, match=r"must have shape \(\d+, 3\) on rank"):
                project_solenoidal_slab(a, fft)
            with pytest.raises(ValueError, match=r"must have shape \(\d+, 3\) on rank"):
                diffuse_slab(a, fft, BOX, NU, TAU)
            with pytest.raises(ValueError, match=r"must have shape \(\d+, 3\) on rank"):
                slab_column_mean(a, n, fft.communicator)
        for nu, tau in [(-1.0, TAU), (NU, float("nan")), (float("inf"), TAU)]:
            with pytest.raises(ValueError, match="finite and >= 0"):
                diffuse_slab(mine, fft, BOX, nu, tau)
        with pytest.raises(ValueError, match="box"):
            diffuse_slab(mine, fft, 0.0, NU, TAU)
        return True
    assert on_ranks(2, lambda comm: work(SlabFFT(n, comm, np))) == [True, True]


@pytest.mark.gpu
@pytest.mark.parametrize("n", [8, 9])
def test_the_ranks_on_cupy_are_the_whole_lattice(n):
    import cupy as cp
    error_p, error_d, projected = _compare(2, n, seed=n, xp=cp)
    assert error_p <= TOLERANCE
    assert error_d <= TOLERANCE
    assert divergent_fraction(projected, n) <= 1e-25

    def mean(fft):
        return slab_column_mean(_rows(_field(n, seed=n), fft), n, fft.communicator)
    means = _on(2, n, mean, cp)
    assert all(isinstance(m, cp.ndarray) for m in means)
    assert len({m.get().tobytes() for m in means}) == 1
    assert np.abs(means[0].get() - _field(n, seed=n).mean(axis=0)).max() <= 1e-15
