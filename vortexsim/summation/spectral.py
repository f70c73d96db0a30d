r"""The periodic box's velocity by its Fourier series: Gaussian blobs through non-uniform FFTs.

In the periodic box [0, L)³ the velocity of Gaussian blobs of one core σ is exactly a
Fourier series (``physics.md``, "Boundaries"): with k ∈ (2π/L) ℤ³ \ {0},

    ω̂(k) = L⁻³ Σ_p α_p e^{−i k·x_p} e^{−|k|²σ²/2},    û(k) = i k × ω̂(k) / |k|²,
    u(y) = Σ_k û(k) e^{i k·y},                           ∂_b u_a(y) = Σ_k i k_b û_a(k) e^{i k·y}.

The k = 0 mode is dropped: the box mean of u is zero (the Ewald "tin-foil" convention),
which needs Σ_p α_p = 0 (else the vorticity field is not periodic).  The series is cut
where the Gaussian factor e^{−|k|²σ²/2}·max(1, |k|σ) falls below tol/10 (the gradient
carries one more power of |k|): |m| ≤ m_max = k_max L / 2π per axis.  Two non-uniform
FFTs (FINUFFT, Barnett et al.) do the sums: type 1 from the elements to the modes,
type 2 from the modes to the targets, both at precision tol/10: O(N + M + n³ log n)
with n = 2 m_max + 1, memory O(n³) (a few complex mode arrays of 3 components).  The
results are bitwise reproducible (restarts, on any machine): the type-1 transform runs on
one thread (FINUFFT's threads add into the grid in a varying order), the type-2 on
:data:`TYPE2_THREADS` (its bits depend on the thread count, not on the run).

At the elements themselves (no targets) each element's own free-space contribution is
left out, as in the direct sum and the FMM: its velocity there is 0, its gradient
(1/4π) √(2/π) Q₀/σ³ ε_acb α_c (Q₀ = 1/3, the Gaussian's q(ρ)/ρ³ at 0); the element's
periodic images stay in.

:class:`SpectralSum` holds the box, σ and tol; :func:`spectral_velocity` is one call.
NumPy arrays go through FINUFFT; CuPy arrays through this package's own deterministic
NUFFT on cuFFT (:mod:`vortexsim.kernels.nufft`: spreading by gathering, no atomics, the
same bits every run), which runs on NumPy too (``nufft="own"``: its specification and
test reference).  The own NUFFT applies the Biot–Savart factors on the half cube of
modes of a real FFT (the field is real): the same series, to the same tol.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..backend import array_namespace, to_host
from ..backend.threads import cpu_threads
from ..geometry.periodic import check_periodic_sources, wrap
from ..kernels.cutoff import (GAUSSIAN_ORDERS, GAUSSIAN_Q_SERIES, GAUSSIAN_ZETA0_RATIO,
                              SQRT_2_OVER_PI, gaussian_blob_transform)
from ..kernels.nufft import PeriodicNufft

__all__ = ["SpectralSum", "spectral_velocity", "spectral_modes", "check_spectral",
           "self_gradient", "FIELD_SUMS", "TYPE2_THREADS", "NUFFTS"]

#: threads of the type-2 transforms: at most this many (fewer where the process has
#: fewer, :func:`vortexsim.backend.threads.cpu_threads`), so that a restart on another
#: machine with at least as many cores gives the same bits
TYPE2_THREADS = 2
#: the NUFFTs of :class:`SpectralSum`: "auto" (FINUFFT on NumPy arrays, the own NUFFT on
#: CuPy arrays), "finufft" (NumPy only), "own" (:mod:`vortexsim.kernels.nufft`, both)
NUFFTS = ("auto", "finufft", "own")


#: the most modes |m| per axis of a spectral sum: its own NUFFT's fine grid of about
#: (4 MAX_MODES)³ points would hold 2 PB; the run's memory estimate refuses less
MAX_MODES = 2 ** 13


def spectral_modes(box, sigma, tol, order=2):
    """m_max: the largest mode index |m| (k = 2π m / L) summed per axis for blobs of core
    ``sigma`` [L] in a box of edge ``box`` [L] at tolerance ``tol``: the smallest k with
    ζ̂(kσ) max(1, kσ) < tol/10, ζ̂ the transform of the Gaussian kernel of ``order``
    (e^{−k²σ²/2} at order 2; :func:`vortexsim.kernels.cutoff.gaussian_blob_transform`)."""
    target = tol / 10.0
    ks = math.sqrt(2.0 * math.log(1.0 / target))          # kσ with e^{−(kσ)²/2} = target
    for _ in range(50):                                    # fixed point with the kσ factor
        ks = math.sqrt(2.0 * math.log(max(1.0, ks) / target))
    if order != 2:                                         # the polynomial's extra reach
        while float(gaussian_blob_transform(0.5 * ks * ks, order)) * max(1.0, ks) >= target:
            ks += 0.01
    return max(1, math.ceil(ks / sigma * box / (2.0 * math.pi)))


def check_spectral(kernel_name, on_gpu):
    """Raise ValueError unless the spectral sum can run: a Gaussian kernel (``gaussian``
    or the high-order ``gaussian4``, ``gaussian6``; on the CPU and, ``on_gpu``, the GPU
    alike)."""
    del on_gpu                                      # both devices sum it
    if kernel_name not in GAUSSIAN_ORDERS:
        raise ValueError(f"the spectral sum needs kernel='gaussian' (or the high-order "
                         f"'gaussian4', 'gaussian6': their Fourier transforms are known in "
                         f"closed form); got kernel={kernel_name!r}.")


class SpectralSum:
    """u and ∇u of Gaussian blobs of one core in the periodic box, to ``tol``.

    Parameters
    ----------
    box : float, the edge L [L] of the box [0, L)³
    sigma : float, the blobs' core σ [L] (one for all)
    tol : float, the relative accuracy (series cut and NUFFT precision; default 1e-6)
    nufft : {"auto", "finufft", "own"}, the non-uniform FFTs (:data:`NUFFTS`): "auto"
        takes FINUFFT for NumPy arrays and the own NUFFT (:mod:`vortexsim.kernels.nufft`)
        for CuPy arrays; "own" takes it for NumPy arrays too.
    order : {2, 4, 6}, the order of the Gaussian kernel (``gaussian``, ``gaussian4``,
        ``gaussian6``): the blobs' transform e^{−x} Σ_{j<order/2} x^j/j!, x = |k|²σ²/2,
        in place of e^{−|k|²σ²/2} everywhere below (default 2).

    Memory and time grow as (L/σ)³ log(L/σ) for the modes plus O(N + M) for the points
    (the own NUFFT: a fine grid of (2 (2 m_max + 1))³ points, three real grids of it and
    one half spectrum at a time; 128³ elements with σ = h at tol 1e-6: 500³, ~10 GB).
    """

    def __init__(self, box, sigma, tol=1e-6, nufft="auto", order=2):
        self.box, self.sigma, self.tol = float(box), float(sigma), float(tol)
        if order not in GAUSSIAN_ORDERS.values():
            raise ValueError(f"order must be one of {tuple(GAUSSIAN_ORDERS.values())}, got "
                             f"{order!r}.")
        self.order = int(order)
        if not (self.box > 0 and math.isfinite(self.box)):
            raise ValueError(f"box must be a positive length, got {box!r}.")
        if not (self.sigma > 0 and math.isfinite(self.sigma)):
            raise ValueError(f"sigma must be a positive length, got {sigma!r}.")
        if not 0 < self.tol < 1:
            raise ValueError(f"tol must be in (0, 1), got {tol!r}.")
        if nufft not in NUFFTS:
            raise ValueError(f"nufft must be one of {NUFFTS}, got {nufft!r}.")
        self.nufft = nufft
        self._own = {}                                # the own NUFFT's modes, per device
        self.m_max = spectral_modes(self.box, self.sigma, self.tol, self.order)
        if self.m_max > MAX_MODES:
            raise ValueError(
                f"the spectral sum of blobs of core sigma = {self.sigma:.6g} in the box L = "
                f"{self.box:.6g} (L/sigma = {self.box / self.sigma:.6g}) needs modes up to "
                f"|m| = {self.m_max} per axis, more than {MAX_MODES} (its grid is beyond any "
                "machine's memory); use larger cores (overlap, sigma) or a smaller box.")
        n = 2 * self.m_max + 1
        m = np.arange(-self.m_max, self.m_max + 1, dtype=np.float64)
        k1 = (2.0 * math.pi / self.box) * m                          # finufft's mode order
        self.k = np.meshgrid(k1, k1, k1, indexing="ij", sparse=True)  # broadcast to (n, n, n)
        self.shape = (n, n, n)
        self.eps = max(self.tol / 10.0, 1e-14)            # the NUFFTs' precision

    @functools.cached_property
    def factor(self):
        """ψ̂/F on FINUFFT's cube of modes (n, n, n): û = i k × ω̂ / |k|² with
        ω̂ = L⁻³ e^{−|k|²σ²/2} F, so this factor is e^{−|k|²σ²/2}/(L³|k|²), 0 at k = 0
        (made on first use: the own NUFFT has its own)."""
        k2 = self.k[0] ** 2 + self.k[1] ** 2 + self.k[2] ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(k2 > 0, self.transform(k2, np) / k2, 0.0) / self.box ** 3

    def transform(self, k2, xp=np):
        """The blobs' Fourier transform ζ̂ at |k|² = ``k2`` [1/L²] (e^{−|k|²σ²/2} at order 2)."""
        return gaussian_blob_transform(0.5 * self.sigma ** 2 * k2, self.order, xp)

    def own_nufft(self, xp):
        """The own NUFFT's :class:`OwnNufftModes` on ``xp``'s current device (made once), or
        None where FINUFFT sums (NumPy arrays unless ``nufft="own"``)."""
        if xp is np and self.nufft != "own":
            return None
        if xp is not np and self.nufft == "finufft":
            raise ValueError("nufft='finufft' takes NumPy arrays; CuPy arrays are summed by "
                             "the own NUFFT (nufft='auto' or 'own').")
        key = "numpy" if xp is np else xp.cuda.Device().id
        if key not in self._own:
            self._own[key] = OwnNufftModes(self, xp)
        return self._own[key]

    def nufft_points(self, points):
        """The NUFFT's periodic coordinates 2π x/L ∈ [0, 2π) of ``points`` (N, 3), per
        axis (contiguous float64)."""
        scale = 2.0 * math.pi / self.box
        return [np.ascontiguousarray(wrap(points[:, i], self.box) * scale) for i in range(3)]

    def nufft_modes(self, angles, alpha):
        """F_c(m) = Σ_p α_{p,c} e^{−i m·θ_p} (3, n, n, n): the type-1 transform, one per
        component, on one thread (bitwise reproducible)."""
        import finufft  # noqa: PLC0415 - the spectral method's dependency
        return finufft.nufft3d1(*angles, np.ascontiguousarray(alpha.T, dtype=np.complex128),
                                self.shape, eps=self.eps, isign=-1, nthreads=1)

    def evaluate(self, x, alpha, targets=None, gradient=True, check=True):
        """u (M, 3) [L/T] and ∇u (M, 3, 3) [1/T] (``grad_u[i, a, b] = ∂u_a/∂x_b``; None
        without ``gradient``; an integer k: at the first k targets only) at ``targets``
        (M, 3) [L] of the elements x, alpha (N, 3) (NumPy float64; positions anywhere,
        wrapped into the box).  Without targets: at the elements, each one's own
        free-space contribution left out.  ``check``: refuse Σα ≠ 0
        (:func:`check_periodic_sources`; a caller that checked at its own precision
        passes False).  NumPy or CuPy arrays (results on the same device)."""
        if check:
            check_periodic_sources(alpha)              # at the input's precision
        own = self.own_nufft(array_namespace(x, alpha, targets))
        if own is not None:
            return evaluate_modes(own, x, alpha, targets, gradient, self.sigma, own.xp,
                                  self.order)
        return evaluate_modes(self, x, alpha, targets, gradient, self.sigma, np, self.order)

    def nufft_values(self, points, f_hat):
        """The type-2 transforms f_k(θ_q) = Σ_m f̂_k(m) e^{i m·θ_q} (K, M) (real part) at
        ``points`` (:meth:`nufft_points`) of the modes ``f_hat`` (K, n, n, n)."""
        import finufft  # noqa: PLC0415 - the spectral method's dependency
        return finufft.nufft3d2(*points, f_hat, eps=self.eps, isign=1,
                                nthreads=min(TYPE2_THREADS, cpu_threads())).real

    @staticmethod
    def first_points(points, k):
        """The first ``k`` of ``points`` (:meth:`nufft_points`)."""
        return [np.ascontiguousarray(c[:k]) for c in points]

    def field_sums(self, x, alpha):
        """Quadratic integrals of the elements' field in the box, from their modes (one
        transform), a dict of floats:

        * ``energy`` E = ½ ∫ψ·ω dV = ½ L³ Σ_k |ω̂|²/|k|² [L⁵/T²], ``enstrophy``
          Ω₂ = ∫|ω|² dV = L³ Σ_k |ω̂|² [L³/T²] (the field of blobs convolved twice, σ√2,
          as the pair sums of :mod:`vortexsim.diagnostics`) and ``helicity``
          H = Σ_p α_p·u(x_p) [L⁴/T²]: the periodic twins of the free-space row;
        * ``kinetic_energy`` ½ ∫|u|² dV = ½ L³ Σ_k |k × ω̂|²/|k|⁴ [L⁵/T²] and
          ``curl_enstrophy`` ∫|∇×u|² dV = L³ Σ_k |k × ω̂|²/|k|² [L³/T²] of the velocity
          the elements induce: equal to E and Ω₂ where the particle vorticity is
          solenoidal, without its divergent part otherwise (u only sees k × ω̂);
        * ``particle_energy`` ½ Σ_p α_p·ψ(x_p) = ½ ∫ω_p·ψ dV [L⁵/T²] and
          ``particle_enstrophy`` Σ_p α_p·ω(x_p) = ∫ω_p·ω dV [L³/T²], between the particle
          vorticity ω_p = Σ α_p δ(x − x_p) and the blob field (smoothed once,
          e^{−|k|²σ²/2}): the energy that the classical scheme with advection by the
          blob velocity keeps for solenoidal ω_p (d/dt ½∫ω_p·ψ = ∫ψ·∇×(u × ω_p) =
          ∫u·(u × ω_p) = 0), and its viscous loss ν ∫ω_p·ω under ν∇²ω_p
          (``docs/periodic.md``, "The energy budget of the method").

        NumPy or CuPy arrays.
        """
        own = self.own_nufft(array_namespace(x, alpha))
        if own is not None:
            return own.field_sums(x, alpha)
        x = np.ascontiguousarray(x, dtype=np.float64)
        alpha = np.ascontiguousarray(alpha, dtype=np.float64)
        if x.shape[0] == 0:
            return dict.fromkeys(FIELD_SUMS, 0.0)
        f = self.nufft_modes(self.nufft_points(x), alpha)
        k2 = self.k[0] ** 2 + self.k[1] ** 2 + self.k[2] ** 2
        inv_k2 = np.where(k2 > 0, 1.0 / np.where(k2 > 0, k2, 1.0), 0.0)
        g1 = self.transform(k2) / self.box ** 3           # L³ ω̂·conj(F/L³) = g1 |F|²
        return mode_sums(f, self.k, inv_k2, g1, self.box, self.factor, 1.0, np)


#: the keys of :meth:`SpectralSum.field_sums`
FIELD_SUMS = ("energy", "enstrophy", "helicity", "kinetic_energy", "curl_enstrophy",
              "particle_energy", "particle_enstrophy")


def cross(k, f, xp):
    """k × f (3, ...) of the broadcast wave vectors k = (k_x, k_y, k_z) and modes f (3, ...)."""
    kx, ky, kz = k
    return xp.stack([ky * f[2] - kz * f[1], kz * f[0] - kx * f[2], kx * f[1] - ky * f[0]])


def mode_sums(f, k, inv_k2, g1, box, factor, weight, xp):
    """:meth:`SpectralSum.field_sums` from the type-1 modes F (3, ...) on wave vectors k:
    inv_k2 = 1/|k|² (0 at k = 0), g1 = e^{−|k|²σ²/2}/L³ (the blob factor over the box
    volume L³ = ``box``³: L³ ω̂·conj(F)/L³ = g1|F|², L³|ω̂|² = g1² L³ |F|²), factor = ψ̂/F,
    weight = each mode's count (2 for the half cube's m_2 > 0, standing for their
    conjugates; else 1); one transfer for the seven sums."""
    f2 = (xp.abs(f) ** 2).sum(axis=0) * weight
    g2 = g1 * g1 * box ** 3
    power = f2 * g2                                                      # L³ |ω̂|²
    cross_power = f2 * g1                                                # L³ ω̂·conj(ω̂_p)
    kf = cross(k, f, xp)
    curl = (xp.abs(kf) ** 2).sum(axis=0) * g2 * inv_k2 * weight          # L³ |k × ω̂|²/|k|²
    # H = Σ_k Re(û_k · F̄_k), û = i k × F e^{−k²σ²/2} / (L³ |k|²)
    helicity = ((1j * kf * xp.conj(f)).sum(axis=0).real * factor * weight).sum()
    sums = to_host(xp.stack([0.5 * (power * inv_k2).sum(), power.sum(), helicity,
                             0.5 * (curl * inv_k2).sum(), curl.sum(),
                             0.5 * (cross_power * inv_k2).sum(), cross_power.sum()]))
    return dict(zip(FIELD_SUMS, (float(v) for v in sums)))


def evaluate_modes(ops, x, alpha, targets, gradient, sigma, xp, order=2):
    """:meth:`SpectralSum.evaluate` (without its check) through ``ops``: its NUFFT's
    ``nufft_points`` (coordinates of positions), ``nufft_modes`` (type 1),
    ``nufft_values`` (type 2), ``first_points`` (the first k points), its wave vectors
    ``k`` and ``factor`` = ψ̂/F; on ``xp``.  ∇u = i k ⊗ û, three transforms at once per direction."""
    x, alpha, y, k_grad, u, g = evaluation_arrays(x, alpha, targets, gradient, xp)
    at_elements = targets is None
    if x.shape[0] == 0 or y.shape[0] == 0:
        return u, g
    tx = ops.nufft_points(x)
    ty = tx if at_elements else ops.nufft_points(y)
    uh = 1j * cross(ops.k, ops.nufft_modes(tx, alpha) * ops.factor, xp)      # û = i k × ψ̂
    u[:] = ops.nufft_values(ty, uh).T
    if k_grad:
        tg = ops.first_points(ty, k_grad)
        for b, kb in enumerate(ops.k):                    # ∂_b u = i k_b û
            g[:, :, b] = ops.nufft_values(tg, (1j * kb) * uh).T
        if at_elements:                                   # the first k targets' own blobs
            g -= self_gradient(alpha[:k_grad], sigma, order)
    return u, g


def evaluation_arrays(x, alpha, targets, gradient, xp):
    """(x, alpha, y, k, u, g) of one evaluation on ``xp``: the elements and the targets
    (y is x without targets) as contiguous float64, the number k of targets with ∇u
    (``gradient``: bool or k) and zero results u (M, 3), g (k, 3, 3) (None without ∇u)."""
    x = xp.ascontiguousarray(x, dtype=xp.float64)
    alpha = xp.ascontiguousarray(alpha, dtype=xp.float64)
    y = x if targets is None else xp.ascontiguousarray(targets, dtype=xp.float64)
    k = 0 if not gradient else y.shape[0] if gradient is True else int(gradient)
    return x, alpha, y, k, xp.zeros((y.shape[0], 3)), (
        xp.zeros((k, 3, 3)) if gradient else None)


def self_gradient(alpha, sigma, order=2):
    """The free-space gradient (N, 3, 3) [1/T] of each blob at its own centre:
    (1/4π) (4π/3) ζ(0)/σ³ ε_acb α_c, = (1/4π) √(2/π) Q₀/σ³ ε_acb α_c for the Gaussian
    (order 2) and 5/2 and 35/8 times that at orders 4 and 6 (its velocity there is 0)."""
    xp = array_namespace(alpha)
    c = GAUSSIAN_ZETA0_RATIO[order] * SQRT_2_OVER_PI * GAUSSIAN_Q_SERIES[0] / (4.0 * math.pi * sigma ** 3)
    a0, a1, a2 = (c * alpha[:, i] for i in range(3))
    z = xp.zeros_like(a0)
    # ε_acb α_c: row a, column b
    return xp.stack([xp.stack([z, -a2, a1], axis=1),
                     xp.stack([a2, z, -a0], axis=1),
                     xp.stack([-a1, a0, z], axis=1)], axis=1)


class OwnNufftModes:
    """The spectral sum of a :class:`SpectralSum` through the own NUFFT
    (:class:`vortexsim.kernels.nufft.PeriodicNufft`) on ``xp`` (numpy or cupy): the
    wave vectors and factors of the half cube of modes on that device."""

    def __init__(self, spectral, xp):
        self.xp, self.box, self.sigma = xp, spectral.box, spectral.sigma
        self.nufft = PeriodicNufft(spectral.m_max, spectral.eps, xp)
        m0, m1, m2 = self.nufft.mode_numbers()
        scale = 2.0 * math.pi / self.box
        # the factors are made on the device from the axes' wave numbers (a core that
        # changes every step, as with core spreading, costs no host work or transfer)
        self.k = tuple(xp.asarray(scale * m.astype(np.float64)).reshape(shape) for m, shape in
                       ((m0, (-1, 1, 1)), (m1, (1, -1, 1)), (m2, (1, 1, -1))))
        k2 = self.k[0] ** 2 + self.k[1] ** 2 + self.k[2] ** 2
        self.inv_k2 = xp.where(k2 > 0, 1.0 / xp.where(k2 > 0, k2, 1.0), 0.0)
        # ψ̂ = ω̂ / |k|² = factor · F (0 at k = 0), as SpectralSum.factor
        blob = spectral.transform(k2, xp)
        self.factor = blob * self.inv_k2 / self.box ** 3
        self.g1 = blob / self.box ** 3                                 # see mode_sums
        # the half cube holds m_2 ≥ 0: the modes m_2 > 0 stand for their conjugates too
        self.weight = xp.asarray(np.where(m2 == 0, 1.0, 2.0).reshape(1, 1, -1))

    def nufft_points(self, points):
        """The NUFFT's grid coordinates (3, N) of ``points`` (N, 3) [L] (wrapped)."""
        return self.nufft.coordinates(wrap(points, self.box) * (2.0 * math.pi / self.box))

    def nufft_modes(self, t, alpha):
        """F_c(m) = Σ_p α_{p,c} e^{−i m·θ_p} (3, half cube)."""
        return self.nufft.type1(t, alpha.T)

    def nufft_values(self, points, f_hat):
        """The type-2 transforms (K, M) at ``points`` (:meth:`nufft_points`)."""
        return self.nufft.type2(points, f_hat)

    def first_points(self, points, k):
        """The first ``k`` of ``points`` (:meth:`nufft_points`)."""
        return self.xp.ascontiguousarray(points[:, :k])

    def field_sums(self, x, alpha):
        """:meth:`SpectralSum.field_sums` on ``xp``."""
        xp = self.xp
        x = xp.ascontiguousarray(x, dtype=xp.float64)
        alpha = xp.ascontiguousarray(alpha, dtype=xp.float64)
        if x.shape[0] == 0:
            return dict.fromkeys(FIELD_SUMS, 0.0)
        f = self.nufft_modes(self.nufft_points(x), alpha)
        return mode_sums(f, self.k, self.inv_k2, self.g1, self.box, self.factor, self.weight,
                         xp)


def spectral_velocity(x, alpha, sigma, box, targets=None, gradient=True, tol=1e-6,
                      check=True, nufft="auto", order=2):
    """One call of :class:`SpectralSum` (NumPy or CuPy arrays; see there)."""
    return SpectralSum(box, sigma, tol, nufft, order).evaluate(x, alpha, targets, gradient,
                                                                check)
