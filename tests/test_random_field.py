"""vortexsim/diagnostics/random_field.py: the random solenoidal initial field on one
process and by x-slabs over ranks (threads playing ranks).  A rank's noise rows are the
whole draw's rows bit for bit; its slab of the field is the one-process field's planes to
1e-12 and its spectrum the slab transform of that slab, on 1, 2 and 3 ranks (slabs of
equal and unequal width); bad inputs raise on every rank before any collective."""
import math

import numpy as np
import pytest
from thread_ranks import on_ranks  # tests/thread_ranks.py

from vortexsim.backend import SingleProcess
from vortexsim.diagnostics.random_field import (noise_rows, random_solenoidal_field,
                                                random_solenoidal_slab)
from vortexsim.geometry.slab import SlabFFT

BOX = 2 * math.pi


@pytest.mark.parametrize("r0, r1", [(0, 7), (5, 40), (39, 64), (64, 64)])
def test_noise_rows_are_the_rows_of_one_draw(r0, r1, monkeypatch):
    """Skipped in blocks smaller than the skip (the block size patched to 7 normals)."""
    import vortexsim.diagnostics.random_field as rf
    monkeypatch.setattr(rf, "SKIP_CHUNK", 7)
    whole = np.random.default_rng(3).standard_normal((64, 3))
    assert noise_rows(3, r0, r1).tobytes() == whole[r0:r1].tobytes()


def _on_slabs(n, size, **kwargs):
    """[(x-planes, u, u_hat, forward of u)] of every rank (SingleProcess for one)."""
    def work(comm):
        fft = SlabFFT(n, comm, np)
        u, u_hat = random_solenoidal_slab(fft, BOX, **kwargs)
        again = [fft.forward(np.ascontiguousarray(u[:, c]).reshape(fft.real_shape))
                 for c in range(3)]
        return fft.x_planes, u, u_hat, again
    return [work(SingleProcess())] if size == 1 else on_ranks(size, work)


@pytest.mark.parametrize("n, size", [(12, 1), (12, 2), (10, 3)])
def test_a_slab_is_the_one_process_field(n, size):
    kwargs = dict(k_peak=3.0, energy=0.4, seed=5)
    whole = random_solenoidal_field(n, BOX, **kwargs)
    scale = np.abs(whole).max()
    ranks, planes = _on_slabs(n, size, **kwargs), []
    # the largest mode of each component over all ranks (a rank's part may hold none)
    largest = [max(np.abs(r[3][c]).max() for r in ranks) for c in range(3)]
    for (i0, i1), u, u_hat, again in ranks:
        planes.append((i0, i1))
        assert u.shape == ((i1 - i0) * n * n, 3)
        assert np.abs(u - whole[i0:i1].reshape(-1, 3)).max() <= 1e-12 * scale
        for c in range(3):       # the spectrum returned is that of the slab's field
            assert np.abs(u_hat[c] - again[c]).max() <= 1e-12 * largest[c]
    assert planes[0][0] == 0 and planes[-1][1] == n       # the slabs cover the lattice
    assert all(a[1] == b[0] for a, b in zip(planes, planes[1:]))


def test_bad_inputs_raise_before_any_transform():
    fft = SlabFFT(8, SingleProcess(), np)
    with pytest.raises(TypeError, match="seed"):
        random_solenoidal_slab(fft, BOX, seed=None)
    with pytest.raises(ValueError, match="energy"):
        random_solenoidal_slab(fft, BOX, energy=0.0, seed=0)
    with pytest.raises(ValueError, match="k_peak"):
        random_solenoidal_slab(fft, BOX, k_peak=-1.0, seed=0)
