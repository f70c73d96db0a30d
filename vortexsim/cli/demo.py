"""Small demonstration: the velocity induced by a discretized vortex ring.

Run ``python -m vortexsim.cli.demo`` (or ``vortexsim-demo``).  It builds one ring
of N equal elements (radius R = 1, circulation Γ = 1, core σ = 0.1), evaluates
the velocity at the ring centre and on the elements with the direct sum, and
compares the centre velocity with the exact value of the discretized ring,
(Γ / 2R) q(R/σ), and the elements' mean axial speed with Saffman's thin-ring
formula for the Gaussian core, and says what their gap means.
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from ..kernels.cutoff import get_kernel
from ..summation import induced_velocity


def ring_elements(n, radius=1.0, circulation=1.0):
    """Positions (n, 3) and strengths α_p = Γ (2πR/n) t̂_p of a single-layer ring in z = 0."""
    phi = 2.0 * math.pi * np.arange(n) / n
    x = np.stack([radius * np.cos(phi), radius * np.sin(phi), np.zeros(n)], axis=1)
    tangent = np.stack([-np.sin(phi), np.cos(phi), np.zeros(n)], axis=1)
    alpha = circulation * (2.0 * math.pi * radius / n) * tangent
    return x, alpha


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="elements on the ring (default 2000)")
    parser.add_argument("--sigma", type=float, default=0.1, help="core radius σ (default 0.1)")
    parser.add_argument("--kernel", default="gaussian", help="cutoff kernel (default gaussian)")
    parser.add_argument("--device", default="auto", help="cpu, gpu or auto (default auto)")
    args = parser.parse_args(argv)
    if args.n < 1 or args.sigma <= 0:
        print("error: --n must be ≥ 1 and --sigma > 0", file=sys.stderr)
        return 2
    radius, gamma = 1.0, 1.0
    x, alpha = ring_elements(args.n, radius, gamma)
    centre = np.zeros((1, 3))
    u_c, _ = induced_velocity(x, alpha, args.sigma, centre, kernel=args.kernel,
                              gradient=False, device=args.device)
    exact = gamma / (2 * radius) * float(get_kernel(args.kernel).q(np.array(radius / args.sigma), np))
    u_el, _ = induced_velocity(x, alpha, args.sigma, kernel=args.kernel, device=args.device)
    saffman = gamma / (4 * math.pi * radius) * (
        math.log(8 * radius / (math.sqrt(2) * args.sigma)) - 0.558)
    print(f"vortex ring: R = {radius}, Gamma = {gamma}, N = {args.n}, sigma = {args.sigma}, "
          f"kernel = {args.kernel}")
    print(f"  velocity at the centre      u_z = {u_c[0, 2]:.15f}")
    print(f"  exact (Gamma/2R) q(R/sigma)     = {exact:.15f}")
    print(f"  mean axial element velocity     = {u_el[:, 2].mean():.6f}")
    print(f"  Saffman thin-ring speed         = {saffman:.6f} (single-layer ring, sigma_eff = sigma)")
    gap = saffman - float(u_el[:, 2].mean())
    print(f"  gap = {gap:.6f} = Gamma/(4 pi R) x {gap * 4 * math.pi * radius / gamma:.4f}: "
          "the elements' mean velocity is the velocity on the core's centre line, which "
          "lies below the speed of the ring as a whole; Saffman's formula is the latter (the "
          "impulse centre's speed, what the runs measure: single_ring, README). "
          "With the Gaussian kernel the gap is not a discretisation error: it stays near "
          "Gamma/(4 pi R) x 0.15 as N grows and sigma -> 0 (0.01236, 0.01224, 0.01222 at "
          "sigma = 0.1, 0.05, 0.025 with N = 2000, 4000, 8000).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
