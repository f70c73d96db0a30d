r"""The periodic n³ lattice split into slabs of x-planes over the ranks of a run: the split
(:class:`Slabs`), the real 3-D FFT of a field so split (:class:`SlabFFT`, the slab
transpose) and the exchange of the M4′ ghost planes between neighbouring slabs
(:func:`add_ghost_planes`, :func:`with_ghost_planes`).

Layout (node (i, j, k) at (i, j, k) h, h = L/n, as in :mod:`.lattice_modes`)
------------------------------------------------------------------------------
* Real fields: rank r of P owns the x-planes i ∈ [i0_r, i1_r) (:class:`Slabs`: ⌈n/P⌉
  planes on the first n mod P ranks, ⌊n/P⌋ on the others), a C-contiguous array
  (n_x, n, n) whose [a, j, k] is node (i0 + a, j, k).
* Half spectra: the rank owns the κ_y planes j ∈ [j0_r, j1_r) of the same split (the y
  axis also has n planes), an array (n, n_y, n//2 + 1) whose [a, b, c] is the mode
  (κ_x, κ_y, κ_z) = (a, j0 + b, c) (signed as :func:`.lattice_modes.wavenumbers`).
* A slab with its ghost planes (the M4′ block of :mod:`.m4_slab`): the planes
  [i0 − 1, i1 + 2), (n_x + 3, n, n); a particle in cell ⌊x/h⌋ touches the nodes
  ⌊x/h⌋ − 1 … ⌊x/h⌋ + 2 (:data:`.remesh.STENCIL`), so the owner's particles reach one plane
  below its slab and two above.  The ghost planes belong to the neighbours r ∓ 1 (mod P)
  when every slab has at least :data:`GHOST_ABOVE` = 2 planes.

Forward transform of one component (:meth:`SlabFFT.forward`): the real FFTs of y and z of
the n_x planes, (n_x, n, n//2 + 1); cut along κ_y into P contiguous blocks (n_x, n_y^q,
n//2 + 1), block q for rank q, in one ``alltoall``; the blocks received concatenated along x
in rank order, (n, n_y, n//2 + 1); the FFT of x.  The inverse runs the same steps backwards
(the FFT of x inverted, the cut along x, one ``alltoall``, the inverse real FFTs of y and z).
These are the operations of :func:`.lattice_modes.rfft3`/:func:`.lattice_modes.irfft3` in
another order: the results agree to round-off.  Local transforms by scipy.fft on
:func:`vortexsim.backend.threads.cpu_threads` threads (NumPy) or cuFFT (CuPy).

Cost per transform and rank: the 2-D real FFTs of n_x planes (O(n_x n² log n)), the 1-D
FFTs of n_y (n/2 + 1) columns of length n, and one alltoall that sends and receives about
16 n_x n_y (n/2 + 1) (P − 1) bytes, 8 (P − 1)/P bytes per owned lattice point.  Memory per
owned lattice point while a transform runs (float64 fields, complex half spectra 8 B per
point): the y–z spectrum 8 B, packed into blocks 8 B (the spectrum then freed), the
received blocks and their concatenation 16 B: 24–32 B at the peak (over MPI, the host
copies and pickles of :class:`vortexsim.backend.mpi.MPICommunicator` on top).

The ghost exchanges are deterministic: each rank adds what it receives to its own values in
rank order, whatever the timing.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..backend import SingleProcess, array_namespace
from ..backend.threads import cpu_threads
from .lattice_modes import fft_input
from .lattice_modes import wavenumbers as lattice_wavenumbers
from .remesh import STENCIL

__all__ = ["Slabs", "SlabFFT", "GHOST_BELOW", "GHOST_ABOVE", "add_ghost_planes",
           "with_ghost_planes"]

#: ghost planes below a slab (the stencil's offset −1) and above it (offsets +1, +2)
GHOST_BELOW = -STENCIL[0]
GHOST_ABOVE = STENCIL[-1]


@dataclasses.dataclass(frozen=True, slots=True)
class Slabs:
    """The even split of n planes among ``size`` ranks: rank r owns [i0, i1) =
    ``slabs[r]``, ⌈n/size⌉ planes on the first n mod size ranks and ⌊n/size⌋ on the
    others, in order (rank 0 from plane 0).  The same split serves the x-planes of the
    real fields and the κ_y planes of their half spectra.

    Parameters
    ----------
    n : int ≥ 1, the planes
    size : int, 1 ≤ size ≤ n, the ranks
    """

    n: int
    size: int

    def __post_init__(self):
        for name in ("n", "size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{name} must be an integer, got {value!r}.")
        if self.n < 1:
            raise ValueError(f"n must be at least 1 plane, got {self.n}.")
        if not 1 <= self.size <= self.n:
            raise ValueError(f"the {self.n} planes cannot be split among {self.size} ranks: "
                             f"expected 1 ≤ size ≤ n = {self.n} (each rank owns a plane at "
                             "least); use fewer ranks or a finer lattice.")

    def __getitem__(self, rank):
        """(i0, i1) of ``rank``."""
        if not 0 <= rank < self.size:
            raise IndexError(f"rank {rank} is not one of the {self.size} ranks.")
        base, extra = divmod(self.n, self.size)
        i0 = rank * base + min(rank, extra)
        return i0, i0 + base + (rank < extra)

    @property
    def bounds(self):
        """((i0, i1) of rank 0, of rank 1, …)."""
        return tuple(self[r] for r in range(self.size))

    def counts(self, per_plane):
        """(rows of rank 0, of rank 1, …) of arrays that hold ``per_plane`` rows a plane
        (n² for the nodes of the n³ lattice in remesh order)."""
        return tuple((i1 - i0) * int(per_plane) for i0, i1 in self.bounds)

    def width(self, rank):
        """The planes of ``rank``: i1 − i0."""
        i0, i1 = self[rank]
        return i1 - i0

    @property
    def thinnest(self):
        """The fewest planes of a rank: ⌊n/size⌋."""
        return self.n // self.size

    def owner(self, plane, xp=np):
        """The rank owning each plane index of ``plane`` (integer array in [0, n))."""
        base, extra = divmod(self.n, self.size)
        plane = xp.asarray(plane, dtype=xp.int64)
        wide = extra * (base + 1)                     # planes of the wider slabs
        return xp.where(plane < wide, plane // (base + 1),
                        extra + (plane - wide) // max(base, 1))


def _scipy_fft():
    import scipy.fft  # noqa: PLC0415
    return scipy.fft


class SlabFFT:
    """The real 3-D FFT of fields split into x-slabs over the ranks of ``communicator``
    (module docstring: layout, cost), on NumPy or CuPy.  Collective: every rank calls each
    transform together.

    Parameters
    ----------
    n : int, lattice nodes per side
    communicator : :class:`vortexsim.backend.Communicator` (default: one process)
    xp : numpy or cupy, where the fields live

    Attributes
    ----------
    slabs : :class:`Slabs` of (n, communicator.size)
    x_planes : (i0, i1), the x-planes of this rank's real slab
    y_planes : (j0, j1), the κ_y planes of this rank's part of the spectrum
    real_shape : (n_x, n, n); spectral_shape : (n, n_y, n//2 + 1)
    """

    def __init__(self, n, communicator=None, xp=np):
        self.communicator = SingleProcess() if communicator is None else communicator
        self.n, self.xp = int(n), xp
        self.slabs = Slabs(self.n, int(self.communicator.size))
        self.rank = int(self.communicator.rank)
        self.x_planes = self.y_planes = self.slabs[self.rank]
        n_x = self.x_planes[1] - self.x_planes[0]
        self.real_shape = (n_x, self.n, self.n)
        self.spectral_shape = (self.n, self.y_planes[1] - self.y_planes[0], self.n // 2 + 1)

    def wavenumbers(self, box, derivative=False):
        """(kx (n, 1, 1), ky (1, n_y, 1), kz (1, 1, n//2 + 1)) [1/L] of this rank's part
        of the half spectrum: :func:`.lattice_modes.wavenumbers` with ky cut to the κ_y
        planes [j0, j1); ``derivative``: the Nyquist planes zero."""
        kx, ky, kz = lattice_wavenumbers(self.n, box, self.xp, derivative=derivative)
        j0, j1 = self.y_planes
        return kx, self.xp.ascontiguousarray(ky[:, j0:j1, :]), kz

    def forward(self, field):
        """This rank's part (n, n_y, n//2 + 1) of the half spectrum of the real field
        whose x-slab is ``field`` (n_x, n, n): the slab's y–z real FFTs, one alltoall,
        the FFTs of x."""
        xp, n = self.xp, self.n
        if tuple(field.shape) != self.real_shape:
            raise ValueError(f"field has shape {tuple(field.shape)}; expected this rank's "
                             f"slab {self.real_shape} (x-planes {self.x_planes}).")
        if xp is np:
            modes = _scipy_fft().rfftn(field, axes=(1, 2), workers=cpu_threads())
        else:
            modes = xp.fft.rfftn(fft_input(field, xp), axes=(1, 2))
        parts = [xp.ascontiguousarray(modes[:, j0:j1, :]) for j0, j1 in self.slabs.bounds]
        del modes
        modes = xp.concatenate(self.communicator.alltoall(parts), axis=0)
        del parts
        if modes.shape != self.spectral_shape:
            raise RuntimeError(f"the slab transpose gave {modes.shape}, expected "
                               f"{self.spectral_shape}: do all ranks use the same n = {n}?")
        if xp is np:
            return _scipy_fft().fft(modes, axis=0, overwrite_x=True, workers=cpu_threads())
        return xp.fft.fft(modes, axis=0)

    def inverse(self, modes):
        """This rank's x-slab (n_x, n, n) of the real field whose half spectrum has the
        part ``modes`` (n, n_y, n//2 + 1) here: the inverse FFT of x, one alltoall, the
        inverse real FFTs of y and z (as :func:`.lattice_modes.irfft3`: the imaginary
        parts of the κ_z = 0 and Nyquist planes are dropped)."""
        xp, n = self.xp, self.n
        if tuple(modes.shape) != self.spectral_shape:
            raise ValueError(f"modes has shape {tuple(modes.shape)}; expected this rank's "
                             f"part of the half spectrum {self.spectral_shape} (κ_y planes "
                             f"{self.y_planes}).")
        if xp is np:
            columns = _scipy_fft().ifft(modes, axis=0, workers=cpu_threads())
        else:
            columns = xp.fft.ifft(modes, axis=0)
        parts = [xp.ascontiguousarray(columns[i0:i1]) for i0, i1 in self.slabs.bounds]
        del columns
        planes = xp.concatenate(self.communicator.alltoall(parts), axis=1)
        del parts
        if planes.shape != (self.real_shape[0], n, n // 2 + 1):
            raise RuntimeError(f"the slab transpose gave {planes.shape}, expected "
                               f"{(self.real_shape[0], n, n // 2 + 1)}: do all ranks use "
                               f"the same n = {n}?")
        if xp is np:
            return _scipy_fft().irfftn(planes, s=(n, n), axes=(1, 2), overwrite_x=True,
                                       workers=cpu_threads())
        return xp.fft.irfftn(planes, s=(n, n), axes=(1, 2))


def _neighbours(slabs, rank):
    """(the rank below, the rank above) of ``rank``, periodic; ValueError unless every
    slab holds the ghost planes that its neighbours need."""
    if slabs.thinnest < GHOST_ABOVE:
        raise ValueError(
            f"slabs of {slabs.thinnest} x-plane(s) ({slabs.n} planes on {slabs.size} ranks) "
            f"are thinner than the M4′ ghost width ({GHOST_BELOW} plane below, "
            f"{GHOST_ABOVE} above, which must come from the neighbouring ranks alone): every "
            f"rank needs at least {GHOST_ABOVE} planes, n ≥ {GHOST_ABOVE * slabs.size} on "
            f"{slabs.size} ranks; use n ≥ {GHOST_ABOVE * slabs.size} or at most "
            f"{max(1, slabs.n // GHOST_ABOVE)} ranks.")
    return (rank - 1) % slabs.size, (rank + 1) % slabs.size


def add_ghost_planes(block, slabs, communicator):
    """The owned planes (C, n_x, n, n) of fields spread onto a slab with its ghost planes,
    ``block`` (C, n_x + 3, n, n) (planes [i0 − 1, i1 + 2)): the ghost planes sent to the
    neighbours that own them (one alltoall) and added to theirs.  Each rank adds to its
    own planes what its neighbours sent, in rank order (from one rank, its planes below
    before its planes above): the same bits whatever the timing.  Collective."""
    xp = array_namespace(block)
    rank = int(communicator.rank)
    down, up = _neighbours(slabs, rank)
    n_x = slabs.width(rank)
    c, n = block.shape[0], slabs.n
    if block.shape[1:] != (n_x + GHOST_BELOW + GHOST_ABOVE, n, n):
        raise ValueError(f"block has shape {block.shape}; expected ({c}, "
                         f"{n_x + GHOST_BELOW + GHOST_ABOVE}, {n}, {n}) (the slab's {n_x} "
                         "planes and its ghost planes).")
    below = block[:, :GHOST_BELOW]                           # planes i0 − 1 … (the rank below)
    above = block[:, GHOST_BELOW + n_x:]                     # planes i1, i1 + 1 (the rank above)
    empty = xp.empty((c, 0, n, n), dtype=block.dtype)
    parts = []
    for q in range(slabs.size):
        send = ([below] if q == down else []) + ([above] if q == up else [])
        parts.append(xp.ascontiguousarray(xp.concatenate(send, axis=1)) if send else empty)
    got = communicator.alltoall(parts)
    own = xp.array(block[:, GHOST_BELOW:GHOST_BELOW + n_x])  # a copy, C-contiguous
    # the rank below sent its planes above (our first GHOST_ABOVE); the rank above its
    # planes below (our last GHOST_BELOW): rank order, and in one part below before above
    for q in sorted({down, up}):
        part, at = got[q], 0
        if q == up:                                          # its `below`: our top planes
            own[:, n_x - GHOST_BELOW:] += part[:, at:at + GHOST_BELOW]
            at += GHOST_BELOW
        if q == down:                                        # its `above`: our first planes
            own[:, :GHOST_ABOVE] += part[:, at:at + GHOST_ABOVE]
            at += GHOST_ABOVE
        if part.shape[1] != at:
            raise RuntimeError(f"rank {q} sent {part.shape[1]} ghost planes, expected {at}: "
                               "do all ranks use the same lattice?")
    return own


def with_ghost_planes(own, slabs, communicator):
    """The slab ``own`` (C, n_x, n, n) of fields with its ghost planes, (C, n_x + 3, n, n)
    (planes [i0 − 1, i1 + 2)), the ghosts fetched from the neighbours (one alltoall).
    Collective."""
    xp = array_namespace(own)
    rank = int(communicator.rank)
    down, up = _neighbours(slabs, rank)
    n_x = slabs.width(rank)
    c, n = own.shape[0], slabs.n
    if own.shape[1:] != (n_x, n, n):
        raise ValueError(f"own has shape {own.shape}; expected ({c}, {n_x}, {n}, {n}) (this "
                         f"rank's slab of x-planes {slabs[rank]}).")
    empty = xp.empty((c, 0, n, n), dtype=own.dtype)
    parts = []
    for q in range(slabs.size):
        # the rank below needs our first planes as its planes above; the rank above our
        # last planes as its planes below
        send = ([own[:, :GHOST_ABOVE]] if q == down else []) + \
            ([own[:, n_x - GHOST_BELOW:]] if q == up else [])
        parts.append(xp.ascontiguousarray(xp.concatenate(send, axis=1)) if send else empty)
    got = communicator.alltoall(parts)
    block = xp.empty((c, GHOST_BELOW + n_x + GHOST_ABOVE, n, n), dtype=own.dtype)
    block[:, GHOST_BELOW:GHOST_BELOW + n_x] = own
    for q in sorted({down, up}):
        part, at = got[q], 0
        if q == up:
            block[:, GHOST_BELOW + n_x:] = part[:, at:at + GHOST_ABOVE]
            at += GHOST_ABOVE
        if q == down:
            block[:, :GHOST_BELOW] = part[:, at:at + GHOST_BELOW]
            at += GHOST_BELOW
        if part.shape[1] != at:
            raise RuntimeError(f"rank {q} sent {part.shape[1]} ghost planes, expected {at}: "
                               "do all ranks use the same lattice?")
    return block
