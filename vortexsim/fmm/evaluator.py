r"""Fast multipole evaluation of u and ∇u: the :class:`FMM` facade.

An evaluation is a plan, then its execution (design and parameter rules:
docs/fmm-design.md; exafmm's ``buildTree``, ``upwardPass``, ``horizontalPass``,
``downwardPass``)::

    plan = fmm.plan(x, sigma, targets)          # order, reach, root cube, depth, tree kind
                                                #   (planning.py)
    u, grad_u = fmm.execute(plan, x, alpha, sigma, targets)
        tree        sources and targets sorted into 8^L leaves (Morton order)   tree.py
        near  ∥     direct pair sums over each leaf's (2r+1)³ stencil            near.py
        upward      P2M at the leaves, M2M up to level 2                         upward.py
        M2L         per level, boxes whose parents are neighbours but which are  m2l.py
                    outside the near stencil (radius r at the leaves, ρ above)
        downward    L2L down to the leaves, L2P at the targets                   downward.py

(the near field runs on its own CUDA streams next to the far field on the GPU).
``tree="adaptive"`` runs the same stages on the adaptive octree (adaptive.py).
``evaluate(..., box=L)`` runs them in the periodic box [0, L)³: the root is the box,
the near field reads ghost sources, the M2L wraps from level 1 on, a precomputed lattice
operator adds the far images at the root and the tin-foil shift is removed
(periodic.py; docs/periodic.md, "The periodic FMM").

Accuracy rules (``tol`` is the relative L2 error of u against the regularized
direct sum; ∇u is held to 10·tol):

* expansion order ``P`` from :func:`~vortexsim.fmm.plan.order_for_tol` (measured table);
* the near field reaches every pair closer than ``reach``
  (:func:`~vortexsim.fmm.near.near_field_reach`): ρ*(tol)·σ_max for ``gaussian``,
  σ_max for ``polynomial``, 0 for ``singular``, ``algebraic`` and ``winckelmans``
  (their far field expands the regularized kernel itself, which needs a uniform σ).
  Leaves are at least reach / r wide.

For the 1/r far field (every kernel but algebraic and winckelmans) the expansions
are kept compressed between P2M and L2P: M2M, M2L and L2L act on the (P+1)²
harmonic components only (exact; :mod:`vortexsim.fmm.operators`).

Both backends run the same algorithm (:mod:`vortexsim.fmm.stages` picks one from the
device): NumPy on the CPU; on the GPU CuPy array code (tree, M2M, M2L and L2L as GEMMs)
plus CUDA kernels for the near field, P2M and L2P (:mod:`vortexsim.fmm.cuda`,
``kernels/cuda/fmm.cu``), all deterministic.
"""
from __future__ import annotations

import dataclasses
import logging

import numpy as np

from ..backend import check_precision, resolve_device, to_host
from ..geometry.periodic import check_periodic_sources, wrap
from ..kernels.cutoff import check_general_kernel, get_kernel
from .adaptive import ADAPTIVE_MAX_DEPTH, adaptive_fmm
from .downward import TargetPart
from .fields import Fields, evaluate_fields
from .near import near_field_reach
from .periodic import check_box, ghost_sources, ghost_tables, lattice_operator, tinfoil_shift
from .plan import (ADAPTIVE_LEAF_SIZE, AUTO_TREE_FACTOR, CAPACITY_SLACK, CHUNK_BYTES,
                   COST_RATES, FLOAT32_TOL_MIN, WIDE_BELOW, WIDE_CPU_BELOW, FMMConfig,
                   M2LPlan, Plan, Planner, check_tol, default_near_radius, default_separation,
                   default_memory_budget, fmm_delivers, gradient_count, order_for_tol,
                   shallow_order, target_sets)
from .planning import plan_free_space, plan_periodic
from .stages import make_stages
from .targets import target_boxes
from .timing import Clock
from .tree import build_tree, check_cube, with_targets

logger = logging.getLogger(__name__)

__all__ = ["FMM", "FMMConfig", "Fields", "Plan", "M2LPlan", "order_for_tol", "near_field_reach",
           "shallow_order", "fmm_delivers", "target_sets", "WIDE_BELOW", "WIDE_CPU_BELOW",
           "FLOAT32_TOL_MIN"]


def _m2l_setting(name, doc):
    """A property of :class:`FMM` that reads and sets attribute ``name`` of its M2L stage."""
    return property(lambda self: getattr(self.stages.m2l, name),
                    lambda self, value: setattr(self.stages.m2l, name, value), doc=doc)


def leaf_counts(step, depth, sync_free):
    """Host bounds on the leaves holding sources and targets for the leaf transforms
    (:func:`~vortexsim.fmm.operators.leaf_boxes`): a step plan's (``step``: its
    :class:`~vortexsim.fmm.plan.M2LPlan` or a tuple of its fields) counts at its start plus
    the sparse M2L's margin (no transfer); without one, "auto" (None in sync-free calls,
    which must not count)."""
    # (depth, capacity, occupied, counts, ...): an M2LPlan or a tuple of its fields
    if step is not None and len(step) > 3 and step[0] == depth:
        src = int(np.asarray(step[3])[-1].sum())
        tgt = int(sum(step[2]))
        return tuple(c + c // CAPACITY_SLACK + 4 for c in (src, tgt))
    return (None, None) if sync_free else ("auto", "auto")


class FMM:
    """Reusable fast multipole evaluator (CPU through NumPy, GPU through CuPy + CUDA).

    Parameters
    ----------
    kernel : str, cutoff kernel (``physics.md``)
    tol : float, relative L2 accuracy of u against the regularized direct sum (∇u: 10·tol)
    precision : {"float64", "float32"}; the near field runs in this precision, the
        expansions always in float64 (their coefficients span too many decades for float32)
    device : {"auto", "cpu", "gpu"} or :class:`vortexsim.Device`, chosen once
    leaf_size : int, optional, target mean number of points per leaf (larger leaves where
        the near field must reach further); default: the depth of least modelled cost
        (:meth:`Planner.cheapest_depth <vortexsim.fmm.plan.Planner.cheapest_depth>`)
    near_radius : {1, 2}, optional, leaf-level near-field stencil half-width in boxes.
        Default: 2 on the CPU for kernels whose near field has a reach (gaussian,
        polynomial: leaves of half the reach, ~0.6× the near pairs), else 1 (the GPU
        runs faster with 1, and the singular kernel gains nothing)
    order : int, optional, expansion order P overriding the rule of :func:`order_for_tol`
    memory_budget : float, optional, bytes the expansion arrays may take (default: a
        quarter of the GPU's memory, or of the host's RAM on the CPU); caps the depth
    separation : {1, 2}, optional, boxes between a box and those it translates from
        (M2L), at every level.  Default: 1 for tol ≥ 1e-6 (the standard FMM, 189
        offsets per box), 2 below (875 offsets, 5³ near stencil; the expansions
        converge ~3.5× per order instead of ~1.75×, which reaches tol 1e-9; the GPU
        then uses the dense M2L and caches ~3.7 GB of translation cores at P = 15)
    tree : {"auto", "uniform", "adaptive"}, default "auto".  "uniform": one leaf level
        for all points.  "adaptive" (:mod:`vortexsim.fmm.adaptive`): leaves where boxes
        hold at most ``leaf_size`` points (default :data:`~vortexsim.fmm.plan.ADAPTIVE_LEAF_SIZE`),
        for clustered inputs; its near stencil is the separation (``near_radius`` must
        then be left unset).  "auto": the adaptive tree when the uniform one, at the
        deepest level it may take, would still leave far more near-field pairs than
        balanced leaves (:meth:`Planner.prefers_adaptive
        <vortexsim.fmm.plan.Planner.prefers_adaptive>`; decided per call, only when the
        depth is left to the cost model), else the uniform tree; ``config.tree`` says
        which ran.  Kernels with a regularized far field (algebraic, winckelmans) always
        use the uniform tree, and so do configurations whose near_radius differs from
        the separation (the CPU's default 5³ stencil for the Gaussian and polynomial
        kernels at tol ≥ 1e-5).  With ``gradient=k`` the adaptive tree computes ∇u at
        every target (the uniform one splits the target sets).

    ``evaluate(x, alpha, sigma, targets=None, gradient=True) -> (u, grad_u)`` takes
    arrays on the evaluator's device; it is :meth:`plan` then :meth:`execute`.
    ``timings`` holds the seconds of each stage of the last call (GPU stages are
    synchronized only when ``profile=True``), ``config`` the derived parameters.
    Operators and index tables that do not depend on positions are cached in the
    evaluator's stages (``stages``, :class:`~vortexsim.fmm.stages.Stages`).
    """

    #: aliases of the planning constants (:mod:`vortexsim.fmm.plan`)
    ADAPTIVE_LEAF_SIZE = ADAPTIVE_LEAF_SIZE
    AUTO_TREE_FACTOR = AUTO_TREE_FACTOR
    CAPACITY_SLACK = CAPACITY_SLACK
    COST_RATES = COST_RATES

    def __init__(self, kernel="gaussian", tol=1e-6, precision="float64", device="auto",
                 leaf_size=None, near_radius=None, order=None, profile=False,
                 memory_budget=None, separation=None, tree="auto"):
        self.kernel = get_kernel(kernel)
        check_general_kernel(self.kernel, "the FMM")
        tol = check_tol(tol)
        self.device = resolve_device(device)
        if separation is None:
            separation = default_separation(self.device, self.kernel.name, tol, near_radius,
                                            leaf_size)
        if separation not in (1, 2):
            raise ValueError(f"separation must be 1 or 2, got {separation!r}.")
        #: boxes between a box and those it translates from, at every level (1: the
        #: standard FMM; 2: the wide separation of tol < 1e-6, whose expansions converge
        #: ~3× per order instead of ~1.75×)
        self.separation = int(separation)
        self.order = (order_for_tol(tol, self.kernel.name, self.separation) if order is None
                      else int(order))
        self.tol = float(tol)
        check_precision(precision)
        if precision == "float32" and tol < FLOAT32_TOL_MIN:
            raise ValueError(
                f"tol = {tol:g} with precision='float32': float32 pair sums err by ~6e-7 "
                f"relative on their own (the direct sum too), so the FMM cannot promise "
                f"less than {FLOAT32_TOL_MIN:g} there. Use precision='float64'.")
        self.dtype = np.dtype(precision)
        if tree not in ("uniform", "adaptive", "auto"):
            raise ValueError(f"tree must be 'uniform', 'adaptive' or 'auto', got {tree!r}.")
        #: "uniform": one leaf level; "adaptive": leaves where boxes hold ≤ leaf_size
        #: points (:mod:`vortexsim.fmm.adaptive`; 1/r far field, else uniform);
        #: "auto": per call, the adaptive tree where the level-uniform one would leave
        #: far too many near-field pairs, else uniform
        self.tree = tree
        if tree == "adaptive":
            if near_radius not in (None, self.separation):
                raise ValueError(
                    f"near_radius = {near_radius} with tree='adaptive': its leaves' near "
                    f"stencil is the separation ({self.separation}); leave near_radius "
                    "unset.")
            near_radius = self.separation
        if near_radius is None:
            near_radius = default_near_radius(self.device, self.kernel.name, self.separation)
        if near_radius not in (1, 2):
            raise ValueError(f"near_radius must be 1 or 2, got {near_radius!r}.")
        if near_radius < self.separation:
            raise ValueError(f"near_radius = {near_radius} is below the separation "
                             f"{self.separation}: the leaves' near field must cover the "
                             "boxes the M2L leaves out.")
        self.leaf_size = None if leaf_size is None else int(leaf_size)
        self.near_radius = int(near_radius)
        self.profile = bool(profile)
        self.timings: dict[str, float] = {}
        self._field_stages = None
        self._wide_stages = None          # the periodic box's 5³-stencil stages, if needed
        self.config: FMMConfig | None = None
        #: the stage objects on this device's backend (near, upward, m2l, downward, ...)
        self.stages = make_stages(self.device, self.kernel, self.dtype, self.tol,
                                  self.separation, self.near_radius,
                                  CHUNK_BYTES[self.device.kind])
        self.memory_budget = default_memory_budget(self.stages.backend) if memory_budget is None \
            else float(memory_budget)
        #: the rules that turn the inputs into a depth (:class:`~vortexsim.fmm.plan.Planner`)
        self.planner = Planner(self.kernel.name, self.tol, self.order, order is not None,
                               self.separation, self.near_radius, self.leaf_size,
                               self.memory_budget, self.device.kind, self.dtype.name)

    # -- tuning knobs of the M2L stage (tests and benchmarks set them) ------------
    @property
    def parent_radius(self):
        """Radius (boxes) within which a box's parent must lie from the parent of a box
        it translates from: the separation (1: the 3³ neighbours, 2: the 5³)."""
        return self.stages.m2l.parent_radius

    #: tuning settings of the M2L stage, readable and settable on the evaluator
    WIDE_CORE_GROUP = _m2l_setting(
        "core_group", "Offsets per group of the wide separation's CPU M2L "
        "(:attr:`M2L.core_group`).")
    SPARSE_M2L_FRACTION = _m2l_setting(
        "sparse_fraction", "Levels with fewer non-empty source boxes than this fraction use "
        "the sparse M2L (:attr:`M2L.sparse_fraction`).")
    SPARSE_M2L_UNIFIED = _m2l_setting(
        "sparse_unified", "None (cost model), True or False: the sparse M2L's variant "
        "(:attr:`M2L.sparse_unified`).")
    TARGET_DENSE_RATIO = _m2l_setting(
        "target_dense_ratio", "Levels with fewer boxes leading to targets than this times "
        "their non-empty source boxes take the dense M2L into them "
        "(:attr:`M2L.target_dense_ratio`).")
    TARGET_DENSE_MIN_BOXES = _m2l_setting(
        "target_dense_min_boxes", "The fewest boxes leading to targets with which a level "
        "takes that dense M2L (:attr:`M2L.target_dense_min_boxes`).")
    SPARSE_M2L_PAIRS = _m2l_setting(
        "sparse_pairs", "None (cost model), True or False: the sparse M2L by offset "
        "(:attr:`M2L.sparse_pairs`).")

    # -- the evaluation ---------------------------------------------------------
    def evaluate(self, x, alpha, sigma, targets=None, gradient=True, *, sigma_range=None,
                 root=None, check_root=True, depth=None, m2l_capacity=None, box=None,
                 check_sources=True, ranks=None):
        """u (M, 3) [L/T] and ∇u (M, 3, 3) [1/T] (or None) at ``targets`` (the sources
        when None): :meth:`plan`, then :meth:`execute`.

        x, alpha (N, 3), sigma (N,) [or scalar], targets (M, 3): arrays of the
        evaluator's device (validated by :func:`vortexsim.induced_velocity`).

        gradient : bool or int
            True: ∇u at every target; False: none (None is returned).  An integer k
            (0 ≤ k ≤ M, explicit ``targets`` only) asks for ∇u at the first k targets
            alone, returned as (k, 3, 3): the others (e.g. passive tracers) get u only,
            which costs about half as much in the near field and a quarter in L2P.

        sigma_range : (float, float), optional
            (min σ, max σ) [L] when the caller knows them; otherwise read from ``sigma``.
        root : (array (3,), float), optional
            Lower corner and edge [L] of a cube holding every source and target (e.g. a
            time stepper's box with slack); otherwise the bounding cube.
        check_root : bool, default True
            Verify that a given ``root`` holds every point (a ValueError otherwise; one
            device-to-host sync).  With ``sigma_range``, ``root``, ``depth`` and
            ``check_root=False`` an evaluation makes no device-to-host transfer at all
            (the GPU then uses the dense M2L: the sparse one sizes its GEMMs on the
            host); the caller then guarantees containment.
        depth : int, optional
            Leaf level of the tree.  By default the level of least modelled cost for
            these points (one small device-to-host transfer), or the ``leaf_size`` rule
            when that was given.  A time stepper may reuse ``config.depth`` of an earlier
            call.  Capped at the deepest level that the near-field reach and the memory
            budget allow (so it is always accurate).
        m2l_capacity : from :meth:`m2l_capacity`, optional
            Sizes for the sparse M2L of a sync-free call (GPU, 1/r far field), so that it
            needs no transfer either, and the occupied leaves of its target sets (thread
            blocks of the near field and L2P); ignored when its depth is not the tree's.
            Any positions are correct with any capacity (overflowing boxes are translated
            one by one); capacities from the same points give the fastest call.
        box : float, optional
            The edge L [L] of a periodic box [0, L)³ (docs/periodic.md, "The periodic
            FMM"): u and ∇u of all periodic images of the elements, the box mean of u
            zero (the tin-foil convention of :mod:`vortexsim.summation.spectral`).  Positions
            anywhere (wrapped into the box); Σα must vanish to round-off; kernels with
            a 1/r far field only (gaussian, polynomial, singular); the root cube is the
            box (``root`` must be left unset), the tree level-uniform, of depth ≥ 2, its
            leaves at least reach / near_radius wide.
        check_sources : bool, default True
            With ``box``: refuse Σα ≠ 0 (:func:`~vortexsim.geometry.periodic.check_periodic_sources`;
            two numbers cross from the GPU).  A time stepper that checked its elements
            once passes False (its stages' Σα drifts by the summation's accuracy).
        ranks : communicator, optional
            Ranks that each make this call at the same time with the same sources (and
            their own targets, e.g. shares of them:
            :class:`~vortexsim.summation.distributed.SharedTargets`).  Where their
            plans agree on the level-uniform tree (root cube, depth, order; one small
            host collective) and the call may transfer (not sync-free), free space, 1/r
            far field, they share the upward pass's leaves
            (:meth:`Upward.shared_leaves <vortexsim.fmm.upward.Upward.shared_leaves>`);
            otherwise each makes the whole of it.  Every rank of ``ranks`` must make
            the call; a rank whose call fails between the agreement and the gather
            leaves the others waiting in it (the CLI's ranks end every rank on an
            error: ``MPI_Abort``).
        """
        clock = Clock(self.device.xp, self.profile and self.device.is_gpu)
        if box is not None and check_sources:          # at the input's precision
            check_periodic_sources(self.device.xp.asarray(alpha))
        x, alpha, sigma, y = self._inputs(x, alpha, sigma, targets)
        plan = self._plan(clock, x, sigma, y, targets is None, gradient, sigma_range, root,
                          check_root, depth, m2l_capacity, None, box)
        return self._execute(clock, plan, x, alpha, sigma, y, ranks)

    def plan(self, x, sigma, targets=None, gradient=True, *, sigma_range=None, root=None,
             check_root=True, depth=None, m2l_capacity=None, sync_free=None, box=None):
        """The :class:`~vortexsim.fmm.plan.Plan` of an evaluation at these points
        (arguments as :meth:`evaluate`, which is ``execute(plan(...), ...)``).

        sync_free : bool, optional
            True: the evaluation must make no device-to-host transfer; this needs
            ``sigma_range``, ``root`` and ``depth`` with ``check_root=False`` (a
            ValueError otherwise) and the level-uniform tree.  False: it may transfer.
            None (default): sync-free exactly when those four arguments allow it.
        """
        clock = Clock(self.device.xp, False)
        x, _, sigma, y = self._inputs(x, None, sigma, targets)
        return self._plan(clock, x, sigma, y, targets is None, gradient, sigma_range, root,
                          check_root, depth, m2l_capacity, sync_free, box)

    def execute(self, plan, x, alpha, sigma, targets=None, gradient=True, check_sources=True,
                ranks=None):
        """u (M, 3) [L/T] and ∇u (M, 3, 3) [1/T] (or None) of the evaluation ``plan``
        (from :meth:`plan` with the same points, targets and gradient; ``check_sources``
        and ``ranks`` as :meth:`evaluate`)."""
        clock = Clock(self.device.xp, self.profile and self.device.is_gpu)
        if plan.box is not None and check_sources:     # at the input's precision
            check_periodic_sources(self.device.xp.asarray(alpha))
        x, alpha, sigma, y = self._inputs(x, alpha, sigma, targets)
        m = y.shape[0]
        if (x.shape[0], m, targets is None, gradient is not False) != (
                plan.n_sources, plan.n_targets, plan.exclude_self, plan.returns_gradient) \
                or gradient_count(gradient, m, targets is None) != plan.gradient_count:
            raise ValueError(
                f"plan made for {plan.n_sources} sources, {plan.n_targets} targets "
                f"(targets given: {not plan.exclude_self}), ∇u at {plan.gradient_count}; "
                f"got {x.shape[0]}, {m} (targets given: {targets is not None}), gradient="
                f"{gradient!r}. Make the plan with the same arguments.")
        return self._execute(clock, plan, x, alpha, sigma, y, ranks)

    def fields(self, x, alpha, sigma, targets=None, target_sigma=None, symmetric=False):
        """u, ψ and ω at blob targets in one pass (:mod:`vortexsim.fmm.fields`): what the
        energy, enstrophy and helicity of the elements need, in O(N + M).

        x, alpha (N, 3), sigma (N,) [or scalar]: the sources; targets (M, 3) [L] and
        target_sigma (M,) [or scalar] [L]: the blobs seen (default: the sources and
        their σ).  Every pair is included, the self pairs too.  Returns
        :class:`~vortexsim.fmm.fields.Fields` (float64 arrays of the evaluator's device);
        ``timings`` holds its stages, ``config`` is left as the last :meth:`evaluate`
        set it.  The tree is always level-uniform.

        ``symmetric`` (no targets): return shares instead of fields, exact only in the
        sums Σ α·u, Σ α·ψ, Σ α·ω (:func:`vortexsim.diagnostics.field_sums`) and about
        half the near field's cost where σ is uniform
        (:func:`~vortexsim.fmm.fields.evaluate_fields`)."""
        if symmetric and (targets is not None or target_sigma is not None):
            raise ValueError("symmetric fields need the sources as the targets.")
        clock = Clock(self.device.xp, self.profile and self.device.is_gpu)
        x, alpha, sigma, y = self._inputs(x, alpha, sigma, targets)
        xp = self.device.xp
        sigma_t = sigma if target_sigma is None and targets is None else xp.broadcast_to(
            xp.asarray(sigma if target_sigma is None else target_sigma, dtype=xp.float64),
            (y.shape[0],))
        out = evaluate_fields(self, x, alpha, sigma, y, sigma_t, clock, symmetric)
        self.timings = clock.finish()
        return out

    #: leaf stencil half-width of the fields pass for kernels with a near-field reach
    #: (gaussian, polynomial): its reach is ~1.3× the velocity's (σ_tq = √2 σ), so its
    #: near field dominates; leaves of half the reach cut its pairs (H100: docs)
    FIELDS_NEAR_RADIUS = 2

    def field_stages(self):
        """(stages, planner) of the fields pass (:meth:`fields`): this evaluator's, or
        for the kernels with a reach a second set with near radius
        :attr:`FIELDS_NEAR_RADIUS` (made once)."""
        radius = max(self.near_radius, self.FIELDS_NEAR_RADIUS) \
            if self.kernel.name in ("gaussian", "polynomial") else self.near_radius
        if radius == self.near_radius:
            return self.stages, self.planner
        if self._field_stages is None:
            self._field_stages = (
                make_stages(self.device, self.kernel, self.dtype, self.tol, self.separation,
                            radius, CHUNK_BYTES[self.device.kind]),
                dataclasses.replace(self.planner, near_radius=radius))
        return self._field_stages

    def m2l_capacity(self, x, sigma_range, root, depth, targets=()):
        """Sizes of the sparse M2L for sync-free calls at these sources (one transfer):
        an :class:`~vortexsim.fmm.plan.M2LPlan`, or None where no sparse M2L can run
        (:meth:`Planner.m2l_capacity <vortexsim.fmm.plan.Planner.m2l_capacity>`)."""
        return self.planner.m2l_capacity(self.stages.m2l, x, sigma_range, root, depth,
                                         targets)

    def adaptive_root(self, width, reach):
        """(depth, root-cube edge [L]) of the adaptive tree for a bounding cube of edge
        ``width`` [L] and the near field's ``reach`` [L] (as :meth:`plan` takes them)."""
        return self.planner.adaptive_root(width, reach, ADAPTIVE_MAX_DEPTH)

    # -- plan -------------------------------------------------------------------
    def _inputs(self, x, alpha, sigma, targets):
        """(x, alpha, sigma (N,), y) as float64 arrays of the evaluator's device; y is
        x itself when ``targets`` is None."""
        xp = self.device.xp
        n = x.shape[0]
        x = xp.asarray(x, dtype=xp.float64)
        y = x if targets is None else xp.asarray(targets, dtype=xp.float64)
        if alpha is not None:
            alpha = xp.asarray(alpha, dtype=xp.float64)
        sigma = xp.broadcast_to(xp.asarray(sigma, dtype=xp.float64), (n,))
        return x, alpha, sigma, y

    def _plan(self, clock, x, sigma, y, exclude_self, gradient, sigma_range, root,
              check_root, depth, m2l_capacity, sync_free, box=None):
        if box is not None:
            if root is not None:
                raise ValueError("a periodic evaluation's root cube is the box [0, L)^3: "
                                 "leave root unset with box=L.")
            if sync_free:
                raise ValueError("sync_free=True is not available with box=L (the ghost "
                                 "sources are counted on the host).")
            return plan_periodic(self, clock, x, sigma, y, exclude_self, gradient,
                                 sigma_range, depth, check_box(box))
        return plan_free_space(self, clock, x, sigma, y, exclude_self, gradient, sigma_range,
                               root, check_root, depth, m2l_capacity, sync_free)

    def periodic_wide_stages(self):
        """(stages, planner) with the 5³ leaf stencil, for periodic boxes whose reach
        does not fit the evaluator's 3³ one at depth 2 (made once)."""
        if self._wide_stages is None:
            self._wide_stages = (
                make_stages(self.device, self.kernel, self.dtype, self.tol, self.separation,
                            2, CHUNK_BYTES[self.device.kind]),
                dataclasses.replace(self.planner, near_radius=2))
        return self._wide_stages

    # -- execute ----------------------------------------------------------------
    def _upward_ranks(self, plan, ranks):
        """``ranks`` where they share this call's upward pass (see :meth:`evaluate`),
        else None.  Every rank reaches the same answer: the collective runs on every
        rank whose call may transfer (sync-free is a function of the arguments, the
        same on every rank), before any branch that depends on its own targets."""
        if ranks is None or ranks.size == 1 or plan.sync_free:
            return None
        lo = None if plan.lo is None else tuple(float(v) for v in to_host(plan.lo))
        key = (plan.tree, plan.depth, plan.order, lo, float(plan.width), plan.box,
               plan.near_radius, plan.n_sources)
        keys = ranks.allgather(key)
        if (any(k != key for k in keys) or plan.tree != "uniform" or plan.depth < 2
                or plan.box is not None or not plan.green.harmonic):
            return None
        return ranks

    def _execute(self, clock, plan, x, alpha, sigma, y, ranks=None):
        xp = self.device.xp
        dtype = self.dtype
        m = y.shape[0]
        ranks = self._upward_ranks(plan, ranks)
        if plan.box is not None:
            same = y is x
            x = wrap(x, plan.box)
            y = x if same else wrap(y, plan.box)
        u = xp.zeros((m, 3), dtype)
        grad_u = xp.zeros((plan.gradient_count, 3, 3), dtype) if plan.returns_gradient \
            else None
        if plan.tree == "empty":
            return u, grad_u
        if plan.tree == "adaptive":
            return self._execute_adaptive(clock, plan, x, alpha, sigma, y, u, grad_u)
        return self._execute_uniform(clock, plan, x, alpha, sigma, y, u, grad_u, ranks)

    def _execute_adaptive(self, clock, plan, x, alpha, sigma, y, u, grad_u):
        """The plan on the adaptive tree (:mod:`vortexsim.fmm.adaptive`) of
        ``plan.depth`` levels in the cube [lo, lo + width)³."""
        xp = self.device.xp
        if plan.check_root:
            check_cube(x, y, plan.lo, plan.width, xp)
        P = plan.order
        self.config = FMMConfig(P, plan.depth, self.near_radius, plan.reach, plan.leaf_size,
                                "adaptive")
        clock.lap("setup")
        uu, gg, tree = adaptive_fmm(self.stages, x, alpha, sigma, y, plan.lo, plan.width,
                                    plan.depth, plan.leaf_size, plan.exclude_self,
                                    plan.gradient_count > 0, plan.uniform_sigma, P, clock)
        u[...] = uu.astype(u.dtype, copy=False)
        if plan.gradient_count:
            grad_u[...] = gg[:plan.gradient_count].astype(grad_u.dtype, copy=False)
        self.timings = clock.finish()
        logger.debug("FMM %s adaptive P=%d depth=%d boxes=%d timings %s", self.kernel.name, P,
                     plan.depth, tree.n_boxes, self.timings)
        return u, grad_u

    def _execute_uniform(self, clock, plan, x, alpha, sigma, y, u, grad_u, ranks=None):
        """The plan on the level-uniform tree: tree → near field ∥ upward → M2L →
        downward (``ranks``: those sharing the upward pass, :meth:`_upward_ranks`).  In
        the periodic box (``plan.box``; positions already wrapped) the near field reads
        the ghost sources' extended grid, the upward pass goes on to the root, the M2L
        wraps from level 1 on, the far lattice adds to the root's local expansion and
        the tin-foil shift is taken off u
        (:mod:`vortexsim.fmm.periodic`)."""
        xp = self.device.xp
        radius = plan.near_radius or self.near_radius
        stages = self.stages if radius == self.near_radius else self.periodic_wide_stages()[0]
        dtype = self.dtype
        depth, P, green = plan.depth, plan.order, plan.green
        exclude_self, k_grad = plan.exclude_self, plan.gradient_count
        self.config = FMMConfig(P, depth, radius, plan.reach, self.leaf_size)
        clock.lap("setup")

        # tree.  Target sets: (first index, points, with ∇u); targets with and without
        # ∇u are sorted into the leaves separately, so each kernel launch is uniform
        sets = [(0, y, k_grad > 0)] if exclude_self else target_sets(y, k_grad)
        tree = build_tree(x, sets[0][1], depth, xp, lo=plan.lo, width=plan.width,
                          check=plan.check_root)
        trees = [tree] + [with_targets(tree, pts, xp, check=plan.check_root)
                          for _, pts, _ in sets[1:]]
        xs, alpha_s, sigma_s = x[tree.src_order], alpha[tree.src_order], sigma[tree.src_order]
        parts = [TargetPart(t, first, xs if exclude_self else pts[t.tgt_order], grad)
                 for t, (first, pts, grad) in zip(trees, sets)]
        # the far field sees the union of the target sets (boxes without targets skip M2L)
        far_tree = tree if len(trees) == 1 else dataclasses.replace(
            tree, tgt_start=sum(t.tgt_start for t in trees))
        box = plan.box
        near_trees, xn, alpha_n, sigma_n, nbr = trees, xs, alpha_s, sigma_s, None
        if box is not None:
            # the wrapped stencils: ghost copies of the sources near the faces
            origin, shift, nbr = stages.operators.cache.get(
                ("periodic_ghosts", depth, radius),
                lambda: tuple(xp.asarray(a) for a in ghost_tables(depth, radius)))
            xn, alpha_n, sigma_n, ext_start = ghost_sources(
                xs, alpha_s, sigma_s, tree.src_start, origin, shift, box, xp)
            near_trees = [dataclasses.replace(t, src_start=ext_start) for t in trees]
        clock.lap("tree")

        # near field ∥ far field.  GPU: each target set's near field runs on its own
        # stream, overlapping the sparse-list transfer and the far field (upward pass,
        # M2L), which are latency-bound; the far field waits for it only before L2P adds
        # into its sums.  Profiling keeps one stream, so that the stage laps stay apart.
        if box is None:
            stages.near.prepare(depth)
        lanes = stages.backend.near_lanes(len(sets), clock.sync)
        step = plan.m2l
        if step is not None and len(step) > 2 and len(step[2]) == len(parts):
            for part, occ in zip(parts, step[2]):
                part.occupied = occ
        else:
            for part in parts:
                part.occupied = plan.occupied_leaves
        for i, part in enumerate(parts):
            part.u, part.g = lanes.run(i, lambda part=part, nt=near_trees[i]: stages.near(
                nt, xn, alpha_n, sigma_n, part.ys, exclude_self, part.grad,
                part.occupied, uniform=plan.uniform_sigma, nbr=nbr))
        if not lanes.concurrent:
            clock.lap("near")
        top = 2 if box is None else 0
        if depth >= 2:
            src_leaves, tgt_leaves = leaf_counts(step, depth, plan.sync_free)
            multipoles = stages.upward(tree, xs, alpha_s, P, clock, green.harmonic, src_leaves,
                                       top=top, ranks=ranks)
            # Separate targets (a rank's Morton share, tracers): the dense M2L and the
            # L2L translate only into boxes whose subtrees hold targets
            # (targets.target_boxes; half the boxes for half of a uniform cube), and a
            # level with fewer such boxes than source boxes takes the dense M2L into them
            # rather than the sparse one over its sources (M2L.sparsity).  Its counts
            # cross to the host in one small transfer (GPU: after the upward pass is
            # queued, next to the sparse lists' transfer); sync-free calls make none and
            # compute every box; the sources as targets fill the cube anyway.
            targets = (target_boxes(far_tree.tgt_start, depth, xp, top=max(top, 1))
                       if not exclude_self and not plan.sync_free else None)
            # the sparse-M2L lists after the upward pass is queued: their one transfer
            # then waits on it instead of leaving the GPU idle
            capacity = step[1] if step is not None else None
            counts = step[3] if step is not None and len(step) > 3 else None
            prepared = (step.layouts if isinstance(step, M2LPlan) and step.order == P
                        else None)
            # (the sparse M2L's tables are those of the standard separation; the
            # periodic box uses the dense M2L)
            sparse = (stages.m2l.sparsity(far_tree, P, capacity, counts, prepared, targets)
                      if green.harmonic and stages.m2l.sparse_capable and self.separation == 1
                      and box is None and (not plan.sync_free or capacity is not None)
                      else None)
            clock.lap("m2l_lists")
            locals_ = stages.m2l(far_tree, multipoles, green, P, clock, sparse,
                                 periodic=box is not None, targets=targets)
            if box is not None:
                # the far lattice: images beyond the root's block, at the root
                T = stages.operators.cache.get(
                    ("lattice", P, self.separation),
                    lambda: xp.asarray(lattice_operator(P, self.separation)))
                r = T.shape[0]
                locals_[0] = (T @ multipoles[0].reshape(r, 3) / box).reshape(r, 1, 3)
                clock.lap("lattice")
        lanes.join()                                               # before L2P adds
        if depth >= 2:
            stages.downward(far_tree, locals_, parts, P, clock, green.harmonic, tgt_leaves,
                            top=top, targets=targets)
        for part in parts:
            order = part.tree.tgt_order
            u[order + part.first if part.first else order] = part.u.astype(dtype, copy=False)
            if part.grad:
                grad_u[order] = part.g.astype(dtype, copy=False)
        if box is not None:
            u -= tinfoil_shift(x, alpha, box, xp).astype(dtype)
        self.timings = clock.finish()
        logger.debug("FMM %s P=%d depth=%d timings %s", self.kernel.name, P, depth,
                     self.timings)
        return u, grad_u
