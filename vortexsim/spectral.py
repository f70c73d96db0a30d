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
CPU only for now (``finufft``); the GPU will use ``cufinufft`` behind the same calls.
"""
from __future__ import annotations

import math

import numpy as np

from .backend import to_host
from .kernels.cutoff import GAUSSIAN_Q_SERIES, SQRT_2_OVER_PI

__all__ = ["SpectralSum", "spectral_velocity", "spectral_modes", "check_periodic_sources",
           "check_spectral", "wrap", "NET_VORTICITY_TOL", "TYPE2_THREADS"]

#: |Σ α| / Σ |α| above which the box's vorticity is not periodic (Σ α must vanish to
#: round-off; in float32 1000 ε of it)
NET_VORTICITY_TOL = 1e-10
#: threads of the type-2 transforms: fixed, so that a restart on another machine gives
#: the same bits
TYPE2_THREADS = 2


def wrap(x, box):
    """Positions x (N, 3) [L] mapped into [0, box)³ (every real position is accepted)."""
    return x - box * np.floor(x / box)


def spectral_modes(box, sigma, tol):
    """m_max: the largest mode index |m| (k = 2π m / L) summed per axis for blobs of core
    ``sigma`` [L] in a box of edge ``box`` [L] at tolerance ``tol``: the smallest k with
    e^{−k²σ²/2} max(1, kσ) < tol/10."""
    target = tol / 10.0
    ks = math.sqrt(2.0 * math.log(1.0 / target))          # kσ with e^{−(kσ)²/2} = target
    for _ in range(50):                                    # fixed point with the kσ factor
        ks = math.sqrt(2.0 * math.log(max(1.0, ks) / target))
    return max(1, math.ceil(ks / sigma * box / (2.0 * math.pi)))


def check_periodic_sources(alpha, what="the elements"):
    """Raise ValueError unless Σα vanishes to round-off (:data:`NET_VORTICITY_TOL`
    relative to Σ|α|): a periodic vorticity field has zero net circulation in the box."""
    a = to_host(alpha)
    tol = max(NET_VORTICITY_TOL, 1e3 * float(np.finfo(a.dtype).eps)) \
        if np.issubdtype(a.dtype, np.floating) else NET_VORTICITY_TOL
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:
        return
    net, scale = np.abs(a.sum(axis=0)).max(), np.abs(a).sum()
    if scale > 0 and net > tol * scale:
        raise ValueError(
            f"the total vorticity of {what} is not zero (|Σα| = {net:.3g}, "
            f"{net / scale:.2g} of Σ|α|): in a periodic box Σα must vanish, or the "
            "velocity is not periodic. Remove the net strength (e.g. subtract its mean "
            "from every element) or use free space.")


def check_spectral(kernel_name, on_gpu):
    """Raise ValueError unless the spectral sum can run: the Gaussian kernel, the CPU."""
    if kernel_name != "gaussian":
        raise ValueError(f"the spectral sum needs kernel='gaussian' (its Fourier transform "
                         f"is a Gaussian); got kernel={kernel_name!r}.")
    if on_gpu:
        raise ValueError("the spectral sum runs on the CPU for now (cufinufft on the GPU is "
                         "not wired yet): use device='cpu'.")


class SpectralSum:
    """u and ∇u of Gaussian blobs of one core in the periodic box, to ``tol``.

    Parameters
    ----------
    box : float, the edge L [L] of the box [0, L)³
    sigma : float, the blobs' core σ [L] (one for all)
    tol : float, the relative accuracy (series cut and NUFFT precision; default 1e-6)

    Memory and time grow as (L/σ)³ log(L/σ) for the modes plus O(N + M) for the points.
    """

    def __init__(self, box, sigma, tol=1e-6):
        self.box, self.sigma, self.tol = float(box), float(sigma), float(tol)
        if not (self.box > 0 and math.isfinite(self.box)):
            raise ValueError(f"box must be a positive length, got {box!r}.")
        if not (self.sigma > 0 and math.isfinite(self.sigma)):
            raise ValueError(f"sigma must be a positive length, got {sigma!r}.")
        if not 0 < self.tol < 1:
            raise ValueError(f"tol must be in (0, 1), got {tol!r}.")
        self.m_max = spectral_modes(self.box, self.sigma, self.tol)
        n = 2 * self.m_max + 1
        m = np.arange(-self.m_max, self.m_max + 1, dtype=np.float64)
        k1 = (2.0 * math.pi / self.box) * m                          # finufft's mode order
        self.k = np.meshgrid(k1, k1, k1, indexing="ij", sparse=True)  # broadcast to (n, n, n)
        k2 = self.k[0] ** 2 + self.k[1] ** 2 + self.k[2] ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            # û = i k × ω̂ / |k|² with ω̂ = L⁻³ e^{−|k|²σ²/2} F: this factor, 0 at k = 0
            self.factor = np.where(k2 > 0, np.exp(-0.5 * k2 * self.sigma ** 2) / k2, 0.0) \
                / self.box ** 3
        self.shape = (n, n, n)
        self.eps = max(self.tol / 10.0, 1e-14)            # the NUFFTs' precision

    def _angles(self, points):
        """The NUFFT's periodic coordinates 2π x/L ∈ [0, 2π) of ``points`` (N, 3), per
        axis (contiguous float64)."""
        scale = 2.0 * math.pi / self.box
        return [np.ascontiguousarray(wrap(points[:, i], self.box) * scale) for i in range(3)]

    def _modes(self, angles, alpha):
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
        passes False)."""
        import finufft  # noqa: PLC0415 - the spectral method's dependency

        if check:
            check_periodic_sources(alpha)              # at the input's precision
        x = np.ascontiguousarray(x, dtype=np.float64)
        alpha = np.ascontiguousarray(alpha, dtype=np.float64)
        at_elements = targets is None
        y = x if at_elements else np.ascontiguousarray(targets, dtype=np.float64)
        k_grad = 0 if not gradient else y.shape[0] if gradient is True else int(gradient)
        u = np.zeros((y.shape[0], 3))
        g = np.zeros((k_grad, 3, 3)) if gradient else None
        if x.shape[0] == 0 or y.shape[0] == 0:
            return u, g
        xs = self._angles(x)
        ys = xs if at_elements else self._angles(y)
        f = self._modes(xs, alpha)
        f *= self.factor                                  # ψ̂ = ω̂ / |k|²
        kx, ky, kz = self.k
        # û = i k × ψ̂
        uh = 1j * np.stack([ky * f[2] - kz * f[1], kz * f[0] - kx * f[2],
                            kx * f[1] - ky * f[0]])
        del f
        u[:] = finufft.nufft3d2(*ys, uh, eps=self.eps, isign=1,
                                nthreads=TYPE2_THREADS).real.T
        if k_grad:
            yg = [np.ascontiguousarray(c[:k_grad]) for c in ys]
            for b, kb in enumerate(self.k):
                g[:, :, b] = finufft.nufft3d2(*yg, 1j * kb * uh, eps=self.eps, isign=1,
                                              nthreads=TYPE2_THREADS).real.T
            if at_elements:                              # the first k targets' own blobs
                g -= self_gradient(alpha[:k_grad], self.sigma)
        return u, g

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
          solenoidal, without its divergent part otherwise (u only sees k × ω̂).
        """
        x = np.ascontiguousarray(x, dtype=np.float64)
        alpha = np.ascontiguousarray(alpha, dtype=np.float64)
        keys = ("energy", "enstrophy", "helicity", "kinetic_energy", "curl_enstrophy")
        if x.shape[0] == 0:
            return dict.fromkeys(keys, 0.0)
        f = self._modes(self._angles(x), alpha)
        kx, ky, kz = self.k
        k2 = kx ** 2 + ky ** 2 + kz ** 2
        inv_k2 = np.where(k2 > 0, 1.0 / np.where(k2 > 0, k2, 1.0), 0.0)
        g2 = np.exp(-k2 * self.sigma ** 2) / self.box ** 3           # L³ |ω̂|² = g2 |F|²
        power = (np.abs(f) ** 2).sum(axis=0) * g2
        cross = np.stack([ky * f[2] - kz * f[1], kz * f[0] - kx * f[2], kx * f[1] - ky * f[0]])
        curl = (np.abs(cross) ** 2).sum(axis=0) * g2 * inv_k2           # L³ |k × ω̂|²/|k|²
        # H = Σ_k Re(û_k · F̄_k), û = i k × F e^{−k²σ²/2} / (L³ |k|²)
        helicity = ((1j * cross * np.conj(f)).sum(axis=0).real * self.factor).sum()
        return {"energy": 0.5 * float((power * inv_k2).sum()),
                "enstrophy": float(power.sum()), "helicity": float(helicity),
                "kinetic_energy": 0.5 * float((curl * inv_k2).sum()),
                "curl_enstrophy": float(curl.sum())}


def self_gradient(alpha, sigma):
    """The free-space gradient (N, 3, 3) [1/T] of each Gaussian blob at its own centre:
    (1/4π) √(2/π) Q₀/σ³ ε_acb α_c (its velocity there is 0)."""
    c = SQRT_2_OVER_PI * GAUSSIAN_Q_SERIES[0] / (4.0 * math.pi * sigma ** 3)
    a0, a1, a2 = (c * alpha[:, i] for i in range(3))
    z = np.zeros_like(a0)
    # ε_acb α_c: row a, column b
    return np.stack([np.stack([z, -a2, a1], axis=1),
                     np.stack([a2, z, -a0], axis=1),
                     np.stack([-a1, a0, z], axis=1)], axis=1)


def spectral_velocity(x, alpha, sigma, box, targets=None, gradient=True, tol=1e-6,
                      check=True):
    """One call of :class:`SpectralSum` (NumPy arrays; see there)."""
    return SpectralSum(box, sigma, tol).evaluate(x, alpha, targets, gradient, check)
