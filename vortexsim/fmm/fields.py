r"""The fields of the diagnostics in O(N + M): u, ψ and ω at blob targets.

The kinetic energy and the enstrophy of the smoothed vorticity field are double sums
over pairs of blobs (:mod:`vortexsim.diagnostics`, Winckelmans & Leonard 1993, §4),

    E  = (1/8π) Σ_p Σ_q (α_p·α_q) g(r_pq/σ_pq)/σ_pq  = ½ Σ_p α_p·ψ_p,
    Ω₂ =        Σ_p Σ_q (α_p·α_q) ζ(r_pq/σ_pq)/σ_pq³ =    Σ_p α_p·ω_p,

σ_pq² = σ_p² + σ_q², so at each target blob t (core σ_t) this pass evaluates

    u_t = (1/4π) Σ_q A(r, σ_q) α_q × d          the velocity (as :meth:`FMM.evaluate`)
    ψ_t = (1/4π) Σ_q g(r/σ_tq)/σ_tq α_q         the vector potential seen through blob t
    ω_t =        Σ_q ζ(r/σ_tq)/σ_tq³ α_q        the vorticity seen through blob t

(the helicity is then Σ α_t·u_t).  It is one FMM pass on the level-uniform tree:

* near field (:meth:`NearField.fields <vortexsim.fmm.near.NearField.fields>`, CUDA
  ``p2p_fields``): every pair of each leaf's stencil, with the blob-pair factors
  (:func:`~vortexsim.kernels.cutoff.blob_pair_factors`), self pairs included;
* far field: the upward pass and M2L of the evaluator, then L2L to the leaves and the
  value (not the curl) of the local expansion at the targets
  (:meth:`Downward.l2p_values <vortexsim.fmm.downward.Downward.l2p_values>`).  ψ's far
  field is that of u: 1/r for the Gaussian, polynomial and singular kernels, the
  regularized G of core σ_tq for the algebraic ones (:func:`field_greens`, a uniform σ);
  ω's is zero for the Gaussian (ζ decays like e^{−ρ²/2}) and the expansion of
  ζ_σtq = c σ^{2ν−3} (r² + σ²)^{−ν} for the algebraic ones.

The leaves are at least :func:`field_reach` / r wide (r = 2 for the kernels with a
reach, as the pass is near-field heavy: :meth:`FMM.field_stages
<vortexsim.fmm.evaluator.FMM.field_stages>`), so that the stencil holds every
pair whose factors differ from the far field's by more than tol/10 (relative; ζ relative
to its peak): for the Gaussian ρ_f(tol) σ_tq,max
(:func:`~vortexsim.fmm.near.gaussian_field_rho`; 5.82 σ_tq at tol = 1e-6).  Pairs of the stencil beyond ρ_f
take the far field's factors too (1/r and 0: cheap, and the same approximation).
The result is float64 whatever the evaluator's precision.
"""
from __future__ import annotations

import math
import typing

from . import expansions as E
from .downward import TargetPart
from .near import gaussian_field_rho, near_field_reach
from .plan import depth_counts, stretched_width
from .tree import build_tree, choose_depth, root_cube

__all__ = ["Fields", "CoresNotUniform", "field_reach", "field_greens", "evaluate_fields"]


class CoresNotUniform(ValueError):
    """The fields of an algebraic kernel asked for cores of several sizes (their far
    field expands the regularized kernel of one σ)."""


class Fields(typing.NamedTuple):
    """u (M, 3) [L/T], ψ (M, 3) [L²/T] and ω (M, 3) [1/T] at the targets, float64, in
    the caller's order (ω is None for kernels without ζ: singular, polynomial)."""

    u: object
    psi: object
    omega: object


def field_reach(kernel_name, tol, sigma_pq_max):
    """Distance [L] below which ψ's and ω's pairs must be summed directly: for the
    Gaussian ρ_f(tol) σ_pq,max (:func:`~vortexsim.fmm.near.gaussian_field_rho`); σ_pq,max for
    ``polynomial`` (g = 1/ρ beyond ρ = 1); 0 for the others (their far field is exact)."""
    if kernel_name == "gaussian":
        return gaussian_field_rho(tol) * sigma_pq_max
    if kernel_name == "polynomial":
        return sigma_pq_max
    return 0.0


def field_greens(kernel_name, sigma_pq):
    """The far-field Green's functions (ψ, ω) for a uniform σ_pq [L] (ω: None where it
    has no far field).  G is 4π × the field's pair factor, as L2P applies 1/4π."""
    if kernel_name in ("singular", "gaussian", "polynomial"):
        return E.green_function(kernel_name, None), None
    s2 = float(sigma_pq) ** 2
    psi = E.green_function(kernel_name, sigma_pq)
    if kernel_name == "algebraic":            # ζ = 3/(4π) (ρ² + 1)^(−5/2)
        return psi, E.GreenFunction(((3.0 * s2, 2.5),), s2)
    if kernel_name == "winckelmans":          # ζ = 15/(8π) (ρ² + 1)^(−7/2)
        return psi, E.GreenFunction(((7.5 * s2 * s2, 3.5),), s2)
    raise ValueError(f"no far-field expansion for kernel {kernel_name!r}.")


def evaluate_fields(fmm, x, alpha, sigma, y, sigma_t, clock, symmetric=False):
    """The :class:`Fields` at targets y (M, 3) [L] with cores sigma_t (M,) [L] of the
    sources x, alpha (N, 3), sigma (N,) (float64 arrays of ``fmm``'s device), through
    the stages and planner of the :class:`~vortexsim.fmm.evaluator.FMM` ``fmm`` for
    this pass (:meth:`FMM.field_stages <vortexsim.fmm.evaluator.FMM.field_stages>`).

    ``symmetric`` (y is x, sigma_t is sigma): where σ is uniform, the near field sums
    half the stencil (:meth:`NearField.fields <vortexsim.fmm.near.NearField.fields>`)
    and the result holds shares whose sums Σ α·u, Σ α·ψ, Σ α·ω are exact, not the
    fields themselves (σ of several sizes: the fields, whose sums are the same)."""
    xp = fmm.device.xp
    stages, planner = fmm.field_stages()
    name = fmm.kernel.name
    n, m = x.shape[0], y.shape[0]
    u, psi, omega = (xp.zeros((m, 3)) for _ in range(3))
    has_zeta = fmm.kernel.zeta is not None
    if n == 0 or m == 0:
        return Fields(u, psi, omega if has_zeta else None)
    lo, width = root_cube(x, y, xp)
    s_min, s_max, t_min, t_max, width = stages.backend.host_floats(
        [sigma.min(), sigma.max(), sigma_t.min(), sigma_t.max(), width])
    if min(s_min, t_min) <= 0:
        raise ValueError("the fields need core radii > 0 at every source and target.")
    if name in ("algebraic", "winckelmans") and max(s_max, t_max) > min(s_min, t_min) * (
            1 + 1e-12):
        raise CoresNotUniform(f"the fields of kernel {name!r} need one uniform sigma (got "
                              f"{min(s_min, t_min):g} to {max(s_max, t_max):g}): their far "
                              "field expands the regularized kernel.")
    green_u = E.green_function(name, s_min)
    green_psi, green_omega = field_greens(name, math.hypot(s_min, t_min))
    reach = max(near_field_reach(name, fmm.tol, s_max),
                field_reach(name, fmm.tol, math.hypot(s_max, t_max)))
    clock.lap("setup")

    # the leaf level whose stencil holds the reach: the evaluator's leaf_size rule, or the
    # level of least modelled cost (as FMM.plan chooses it)
    uniform = s_min == s_max == t_min == t_max
    symmetric = symmetric and uniform
    depth_max, min_leaf = planner.depth_limit(width, reach)
    occ = None                                     # leaves holding targets, when counted
    if fmm.leaf_size is not None:
        depth = choose_depth(n, m, fmm.leaf_size, max_depth=depth_max)
    else:
        pairs, occupied = depth_counts(x, y, lo, width, depth_max, min_leaf,
                                       planner.near_radius, xp)
        # the symmetric pass meets half the pairs, each at about twice the velocity's cost
        # (erf, exp): the velocity's model as it is (H100: halving the pairs chose
        # shallower trees that were slower)
        depth = planner.cheapest_depth(pairs, green_u, occupied)
        occ = float(occupied[depth, depth])
    width = stretched_width(width, depth, min_leaf)
    P = planner.order_at(depth)
    tree = build_tree(x, y, depth, xp, lo=lo, width=width, check=False)
    xs, alpha_s, sigma_s = x[tree.src_order], alpha[tree.src_order], sigma[tree.src_order]
    ys, st = y[tree.tgt_order], sigma_t[tree.tgt_order]
    clock.lap("tree")

    # near field ∥ far field (GPU: its own stream, as in FMM.evaluate); joined before the
    # far field's L2P adds into its sums
    stages.near.prepare(depth, symmetric)
    lanes = stages.backend.near_lanes(1, clock.sync)
    near = lanes.run(0, lambda: stages.near.fields(tree, xs, alpha_s, sigma_s, ys, st,
                                                   occupied=occ, uniform=uniform,
                                                   symmetric=symmetric))
    if not lanes.concurrent:
        clock.lap("near")
    if depth < 2:
        lanes.join()
        u_s, psi_s, omega_s = near
    else:
        centres, w = stages.operators.box_centers(tree, depth), float(tree.box_width(depth))
        # one M2L per distinct far-field Green's function; its locals serve u, ψ, ω alike
        wanted = [(green_u, "u"), (green_psi, "psi")] + (
            [(green_omega, "omega")] if green_omega is not None else [])
        multipoles = {}
        for green in dict.fromkeys(g for g, _ in wanted):
            harmonic = green.harmonic
            if harmonic not in multipoles:
                multipoles[harmonic] = stages.upward(tree, xs, alpha_s, P, clock, harmonic)
            sparse = (stages.m2l.sparsity(tree, P) if harmonic and stages.m2l.sparse_capable
                      and fmm.separation == 1 else None)
            locals_ = stages.m2l(tree, multipoles[harmonic], green, P, clock, sparse)
            Ll = stages.downward.to_leaves(tree, locals_, P, clock, harmonic)
            if near is not None:                                   # before L2P adds
                lanes.join()
                (u_s, psi_s, omega_s), near = near, None
            for g, field in wanted:
                if g != green:
                    continue
                if field == "u":
                    stages.downward.l2p(Ll, centres, w, tree.tgt_start,
                                        [TargetPart(tree, 0, ys, False, u_s, None, occ)], P)
                else:
                    out = psi_s if field == "psi" else omega_s
                    out += stages.downward.l2p_values(Ll, centres, w, tree, ys, P, occ)
            clock.lap("far")
    u[tree.tgt_order], psi[tree.tgt_order], omega[tree.tgt_order] = u_s, psi_s, omega_s
    return Fields(u, psi, omega if has_zeta else None)
