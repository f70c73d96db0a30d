r"""M2L: multipole-to-local translations between well-separated boxes of each level.

A box at offset d from a target box translates into it when their parents lie within
ρ boxes of each other (ρ: the separation, 1 or 2) and it lies outside the near stencil
(:func:`interacts`).  Boxes of one parity class (Morton key & 7) share their offsets.

Dense M2L (every level, both backends): for the 1/r far field, per parity class one
GEMM of the class's unit cores (offset-major) against the compressed multipoles gathered by
offset (A(w) = w^−(1+|k|+|m|) A(1) and A(1) = U C Vᵀ exactly, docs/fmm-design.md); for
the regularized far field (algebraic, winckelmans) one GEMM per offset with operators
built per level (they depend on σ/w).

Sparse M2L (GPU, 1/r, standard separation): on levels where most boxes are empty
(:meth:`M2L.sparse_layout`), either GEMMs over the non-empty source boxes only, per
source class (every offset of each), then ``m2l_gather_sum`` sums each target's blocks;
or ("pairs") per offset d one GEMM over the pairs (source box s, target box s − d) that
both hold points, batched by offset (:class:`PairLists`), then ``m2l_pair_sum``.  When
the rings of a run spread and the tracers trail behind, half of a source box's offsets
or more point at boxes without targets (leapfrog at t = 20: 47 % of level 5's products,
72 % of level 4's); the pairs variant skips them.

Target boxes (dense 1/r M2L): where the targets fill part of the cube, each class's
GEMMs take only the boxes leading to targets (:mod:`vortexsim.fmm.targets`).

:class:`M2L` is the NumPy implementation; :class:`vortexsim.fmm.cuda.CudaM2L` gathers
with one CUDA kernel and adds the sparse path.
"""
from __future__ import annotations

import typing

import numpy as np

from . import expansions as E
from .tree import morton_decode, neighbor_table

__all__ = ["M2L", "PairLists", "interacts", "class_cores", "apply_to_boxes"]

OFFSETS_3 = E.OFFSETS_3


def interacts(parity, d, sep, parent_radius=1):
    """M2L rule: a box of ``parity`` (…, 3) takes the box at offset ``d`` (…, 3) when their
    parents are within ``parent_radius`` boxes of each other (parity + d ∈ [−2ρ, 2ρ + 1]
    per axis) and it lies outside the near stencil (max |d| ≥ ``sep``)."""
    rho = parent_radius
    return (np.all((parity + d >= -2 * rho) & (parity + d <= 2 * rho + 1), axis=-1)
            & (np.abs(d).max(axis=-1) >= sep))


def class_cores(K, offsets, xp=np):
    """Columns of the unit cores K (r, 343 r) for ``offsets``, offset-major (r, r |offsets|):
    column q r + k for coefficient k of offset q (NumPy's take: 4-7x its fancy indexing)."""
    r, K3 = K.shape[0], K.reshape(K.shape[0], -1, K.shape[0])
    if xp is np:
        return np.take(K3, offsets, axis=1).reshape(r, r * len(offsets))
    return xp.ascontiguousarray(K3[:, xp.asarray(offsets), :].reshape(r, r * len(offsets)))


def apply_to_boxes(A, X, xp):
    """A (n, n) applied to every box: X (B, n, 3) → (B, n, 3), as one GEMM."""
    B, n, _ = X.shape
    Y = A @ X.transpose(1, 0, 2).reshape(n, B * 3)
    return Y.reshape(A.shape[0], B, 3).transpose(1, 0, 2)


class PairLists(typing.NamedTuple):
    """A level's sparse M2L by offset (:meth:`M2L.sparsity`): the source and target
    counts per box (B,) of the level, its host layout (:meth:`M2L.sparse_layout`, with
    ``pairs``) and the layout's device tables (capacity, list base and GEMM-input base
    per offset slot)."""

    src_cnt: object
    tgt_cnt: object
    layout: dict
    tables: tuple


#: the parity classes' bits (8, 3): class p = x + 2y + 4z of a box's cell parities
PARITY_BITS = np.array([[p & 1, (p >> 1) & 1, (p >> 2) & 1] for p in range(8)])


class M2L:
    """M2L of one evaluator, NumPy implementation.

    operators: the evaluator's :class:`~vortexsim.fmm.operators.Operators` (device and
    cache); separation: ρ (1 or 2); near_radius: the leaves' stencil half-width r;
    dtype, tol: the evaluator's precision and tolerance (they choose the GEMM dtype,
    :meth:`gemm_dtype`); chunk_bytes: work-array budget of one batched GEMM [bytes].
    """

    #: whether this backend has the sparse M2L (:meth:`sparse`)
    sparse_capable = False
    #: whether the wide separation's class cores are all cached (else cut per group)
    cache_all_cores = False
    #: 3-vectors gathered per GEMM column (the NumPy path gathers one component at a time)
    gathered_components = 1
    #: offsets per group of the wide separation's CPU M2L: cores cut per group keep the
    #: peak memory near 1 GB instead of ~3 GB (docs/fmm-design.md, "Calibration data")
    CORE_GROUP = 256
    #: levels whose fraction of non-empty source boxes is below this use the sparse M2L
    SPARSE_FRACTION = 0.5
    #: a level whose boxes leading to targets are fewer than this times its non-empty
    #: source boxes takes the dense M2L into those boxes (:meth:`sparsity`)
    TARGET_DENSE_RATIO = 1.0
    #: the fewest boxes leading to targets with which a level takes that dense M2L
    #: (fewer: launch-bound).  One H200, 2^24 blobs, a quarter share: level 5, 2508
    #: boxes, 9.6 ms dense, 11.9 sparse; level 4, 383 boxes, 5.3 and 2.1 (RESULTS.md)
    TARGET_DENSE_MIN_BOXES = 1024
    #: whether this backend has the sparse M2L by offset (:class:`PairLists`)
    pairs_capable = False
    #: deepest level of the sparse M2L by offset: its slot map holds an int32 per
    #: (offset, box), 316 × 8^level (331 MB at level 6)
    PAIRS_MAX_LEVEL = 6

    def __init__(self, operators, separation, near_radius, dtype, tol, chunk_bytes):
        self.operators = operators
        self.device = operators.device
        self.cache = operators.cache
        self.separation = separation
        self.near_radius = near_radius
        self.dtype = dtype
        self.tol = tol
        self.chunk_bytes = chunk_bytes
        self.core_group = self.CORE_GROUP
        self.sparse_fraction = self.SPARSE_FRACTION
        self.target_dense_ratio = self.TARGET_DENSE_RATIO
        self.target_dense_min_boxes = self.TARGET_DENSE_MIN_BOXES
        #: None: the sparse M2L picks per level between one GEMM per source class and
        #: one GEMM against all 343 cores by a cost model; True / False force one (tests)
        self.sparse_unified = None
        #: None: the sparse M2L by offset where the cost model prefers it (and its sizes
        #: are known); True: wherever its sizes are known; False: never (tests, A/B)
        self.sparse_pairs = None

    # -- rules and index tables ----------------------------------------------
    @property
    def parent_radius(self):
        """Radius (boxes) within which a box's parent must lie from the parent of a box
        it translates from: the separation (1: the 3³ neighbours, 2: the 5³)."""
        return self.separation

    @property
    def offset_radius(self):
        """Half-width of the offset cube holding every M2L offset: 2ρ + 1 (3 or 5)."""
        return 2 * self.parent_radius + 1

    def separation_at(self, level, L):
        """M2L separation rule of a level of a tree of L levels: translate from boxes at
        least this many boxes away (the leaves' near stencil, or the parents' radius)."""
        return self.near_radius + 1 if level == L else self.parent_radius + 1

    def gemm_dtype(self):
        """dtype of the 1/r M2L GEMMs: float32 in float32 runs with tol ≥ 1e-5
        (normalized expansions are O(1), so float32 rounding stays far below tol)."""
        return np.float32 if self.dtype == np.float32 and self.tol >= 1e-5 else np.float64

    def class_offsets(self, sep):
        """Per parity class p = key & 7 the indices O_p of its M2L offsets into
        ``offsets_cube(2ρ + 1)`` (host int arrays; the same at every level)."""
        rho, radius = self.parent_radius, self.offset_radius
        return [np.nonzero(interacts(np.array([p & 1, (p >> 1) & 1, (p >> 2) & 1]),
                                     E.offsets_cube(radius), sep, rho))[0]
                for p in range(8)]

    def class_vectors(self):
        """Per parity class the M2L offsets (|O_p|, 3) [box widths] above the leaf
        level (the adaptive tree's ``class_offsets``)."""
        return [E.offsets_cube(self.offset_radius)[o]
                for o in self.class_offsets(self.parent_radius + 1)]

    def pair_slots(self, sep):
        """The offsets of the sparse M2L by offset (host, cached): (slots, bucket), the
        indices into OFFSETS_3 of the offsets d that some target parity class takes at
        separation ``sep`` (316 for sep 2, 218 for 3), ordered by bucket = the number of
        components with |d_i| = 3 (a target takes such an offset in half of the parity
        classes per such component, so a bucket's offsets hold similar numbers of pairs
        and share one capacity)."""
        def build():
            off = E.OFFSETS_3
            ok = np.nonzero([interacts(PARITY_BITS, d[None, :], sep).any() for d in off])[0]
            bucket = (np.abs(off[ok]) == 3).sum(axis=1)
            order = np.argsort(bucket, kind="stable")
            return ok[order], bucket[order]
        return self.cache.get(("m2l_pair_slots", sep), build)

    def pair_layout(self, P, sep, caps, mdt):
        """Host layout of the sparse M2L by offset: ``caps`` (4,) the pair capacity of each
        bucket (:meth:`pair_slots`).  A dict with ``pairs`` True, ``caps``, ``y_size``
        (elements of the GEMM input and output), ``cost`` (modelled seconds, as
        :meth:`sparse_layout`'s) and ``tables`` (per offset slot: capacity, first list
        slot, first GEMM-input element; int64)."""
        r = (P + 1) ** 2
        item = np.dtype(mdt).itemsize
        _, bucket = self.pair_slots(sep)
        caps = np.maximum(np.asarray(caps, dtype=np.int64), 0)
        cap = caps[bucket]
        size = 3 * cap * r
        n_pairs = int(cap.sum())
        cost = (6 * n_pairs * r * r / 2.5e13
                + (4 * 3 * n_pairs * r + len(cap) * r * r) * item / 2.5e12)
        return {"pairs": True, "caps": caps, "y_size": int(size.sum()), "cost": cost,
                "tables": (cap, np.concatenate([[0], np.cumsum(cap)[:-1]]).astype(np.int64),
                           np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int64))}

    def pair_bucket_caps(self, counts, sep, slack=None):
        """(4,) host pair capacities per bucket from per-slot pair counts (host (n,)):
        the bucket's largest count, plus ``count // slack + 4`` with a ``slack`` (a plan
        made at a step's start, for the positions its stages reach)."""
        _, bucket = self.pair_slots(sep)
        counts = np.asarray(counts, dtype=np.int64)
        caps = np.zeros(4, dtype=np.int64)
        for b in range(4):
            if (bucket == b).any():
                caps[b] = counts[bucket == b].max()
        if slack:
            caps = caps + caps // slack + 4
        return caps

    def pair_levels(self, levels):
        """Those of ``levels`` whose sparse M2L may go by offset: this backend has it,
        :attr:`sparse_pairs` is not False and the level is at most
        :attr:`PAIRS_MAX_LEVEL`."""
        return [level for level in levels if self.pairs_capable
                and self.sparse_pairs is not False and level <= self.PAIRS_MAX_LEVEL]

    def pair_caps_of(self, levels, host, L, slack=None):
        """{level: (4,) pair capacities} (:meth:`pair_bucket_caps`) of ``levels`` of a
        tree of depth ``L``, from ``host``: their :meth:`pair_counts`, concatenated in
        that order and copied to the host."""
        caps, at = {}, 0
        for level in levels:
            sep = self.separation_at(level, L)
            n = len(self.pair_slots(sep)[0])
            caps[level] = self.pair_bucket_caps(host[at:at + n], sep, slack)
            at += n
        return caps

    def pair_counts(self, src_cnt, tgt_cnt, level, sep):
        """Per offset slot the number of pairs (device (n,) int64), or None where this
        backend has no sparse M2L by offset."""
        return None

    def pairs_host(self, level, sep):
        """Host index tables: [(offset d (3,), target boxes, source boxes)] for one level."""
        def build():
            rho, radius = self.parent_radius, self.offset_radius
            nbr = neighbor_table(level, radius, np)
            ix, iy, iz = morton_decode(np.arange(8 ** level, dtype=np.uint64), level, np)
            parity = np.stack([ix, iy, iz], axis=1) % 2
            pairs = []
            for o, d in enumerate(E.offsets_cube(radius)):
                ok = (nbr[:, o] >= 0) & interacts(parity, d, sep, rho)
                tgt = np.nonzero(ok)[0]
                if tgt.size:
                    pairs.append((d, tgt, nbr[tgt, o]))
            return pairs
        return self.cache.get(("m2l_pairs", level, sep), build)

    def pairs(self, level, sep):
        """:meth:`pairs_host` with the index arrays on the evaluator's device."""
        return self.pairs_host(level, sep)

    def classes(self, level, sep, periodic=False):
        """Per parity class p = key & 7: (offset indices O_p into the offsets of radius
        2ρ + 1 (ρ: :attr:`parent_radius`; OFFSETS_3 for the standard FMM), gather (B/8, |O_p|)).

        gather[j, q] is the source box of target box p + 8j at offset O_p[q], or 8^level
        (a zero column) where that box lies outside the grid.  ``periodic``: the grid
        wraps (the periodic box), so every offset has a source box (index mod 2^level),
        translated with the operator of the unwrapped offset: one of its images.
        """
        def build():
            # made on the evaluator's device: on the host the table of level 5 (32 768 ×
            # 343 keys) took ~1-3 s, paid by the first step that deepens the tree
            xp = self.device.xp
            nbr = neighbor_table(level, self.offset_radius, xp, periodic)
            zero = 8 ** level
            classes = []
            for p, offsets in enumerate(self.class_offsets(sep)):
                g = nbr[p::8][:, xp.asarray(offsets)]
                classes.append((offsets, xp.ascontiguousarray(xp.where(g >= 0, g, zero))))
            return classes
        return self.cache.get(("m2l_classes", level, sep, periodic), build)

    # -- the pass ----------------------------------------------------------------
    def __call__(self, tree, multipoles, green, P, clock, sparse=None, periodic=False,
                 targets=None):
        """Normalized local expansions per level (levels 2..L) from M2L: compressed
        L̂ (r, 8^level, 3) for the 1/r far field, else L̃ (8^level, n, 3).

        ``targets``: :func:`~vortexsim.fmm.targets.target_boxes` of the tree (the
        boxes leading to targets, per level), or None (every box).  With it, the dense
        1/r M2L translates only into those boxes, and the other boxes' locals are zero:
        they hold no targets, and the L2L never carries them to one.  The listed boxes
        get the same sums as without it, up to round-off (GEMMs of other widths).  The
        sparse M2L already skips boxes without targets (``tgt_cnt``); the regularized
        far field's M2L (algebraic, winckelmans) computes every box.

        ``multipoles``: the upward pass's; ``green``: the far field's
        :class:`~vortexsim.fmm.expansions.GreenFunction`; ``sparse``: :meth:`sparsity`
        of the tree (GPU), or None for the dense M2L.  ``periodic`` (the root is the
        periodic box; 1/r far field, dense M2L): wrapped interaction lists at levels
        1..L (:meth:`classes`).
        """
        L = tree.depth
        locals_ = {}
        # All levels on the current stream: cuBLAS shares one handle and workspace across
        # streams, and overlapping levels made results differ run to run (docs).
        for level in range(1 if periodic else 2, L + 1):
            locals_[level] = self.level(tree, multipoles, green, P, clock, sparse, level,
                                        periodic, None if targets is None
                                        else targets.get(level))
        clock.laps["m2l"] = sum(v for k, v in clock.laps.items() if k.startswith("m2l_"))
        return locals_

    def level(self, tree, multipoles, green, P, clock, sparse, level, periodic=False,
              boxes=None):
        """Normalized local expansion of one level from its M2L (see :meth:`__call__`);
        ``boxes``: the :class:`~vortexsim.fmm.targets.TargetBoxes` of this level that
        receive translations (the others get zero locals), or None (all)."""
        xp = self.device.xp
        L = tree.depth
        M = multipoles[level]
        sep = self.separation_at(level, L)
        w = float(tree.box_width(level))
        if green.harmonic:
            # 1/r: A(w)[k, m] = w^−(1+|k|+|m|) A(1)[k, m] and A(1) = U C Vᵀ exactly
            # (harmonic_bases), so on normalized expansions L̃ = U (C (Vᵀ M̃)) / w.
            # Boxes of one parity class (key & 7, i.e. every 8th box) share their
            # interaction offsets O_p, so per class one GEMM over all its boxes and
            # the three components:
            #   L̃[:, (t, c)] = [C_o]_{o ∈ O_p} (offset-major) · M̃[k, src(t, o), c]
            # on compressed multipoles gathered box by box (no zero blocks).
            # The multipoles arrive compressed (M̂ = Vᵀ M̃, (r, B, 3), the upward pass) and
            # the locals leave compressed (L̂ = C M̂ / w, L̃ = U L̂, the downward pass).
            mdt = self.gemm_dtype()
            Mt = M
            r, B = Mt.shape[0], Mt.shape[1]
            if sparse is not None and sparse[level] is not None:
                Lt = self.sparse(tree, level, sep, xp.ascontiguousarray(Mt), P,
                                 sparse[level], mdt)
                clock.lap(f"m2l_{level}")
                return Lt.astype(np.float64, copy=False) / w
            Mcm, Mcc = self.gather_operands(Mt, mdt)
            if boxes is None:
                Lt = xp.empty((r, B, 3), mdt)
                for p, (offsets, gather) in enumerate(self.classes(level, sep, periodic)):
                    for j0, j1, Y, first in self.class_products(Mcm, Mcc, gather, p,
                                                                offsets, P, sep, mdt):
                        if first:
                            Lt[:, p + 8 * j0:p + 8 * j1:8, :] = Y
                        else:
                            Lt[:, p + 8 * j0:p + 8 * j1:8, :] += Y
            else:
                # only the boxes leading to targets: each class's GEMMs over its listed
                # rows of the gather table, scattered back (the others stay zero)
                Lt = xp.zeros((r, B, 3), mdt)
                for p, (offsets, gather) in enumerate(self.classes(level, sep, periodic)):
                    rows = boxes.rows[p]
                    if rows.shape[0] == 0:
                        continue
                    for j0, j1, Y, first in self.class_products(Mcm, Mcc, gather[rows], p,
                                                                offsets, P, sep, mdt):
                        at = p + 8 * rows[j0:j1]
                        if first:
                            Lt[:, at, :] = Y
                        else:
                            Lt[:, at, :] += Y
            clock.lap(f"m2l_{level}")
            return Lt.astype(np.float64, copy=False) / w
        else:
            # regularized G: operators depend on σ/w, built per level, one GEMM per
            # offset, on de-normalized expansions (M = w^|m| M̃, L̃ = w^|k| L)
            degree = E.multi_indices(P).k.sum(axis=1).astype(np.float64)
            wdeg = xp.asarray(w ** degree)
            M = M * wdeg[None, :, None]
            idx, binom = (xp.asarray(a) for a in E.m2l_tables(P))
            pairs = self.pairs(level, sep)
            Lc = xp.zeros_like(M)
            R = xp.asarray(np.array([-d * w for d, _, _ in pairs]).reshape(-1, 3))  # c_L − c_M
            T = E.kernel_taylor(green, R, 2 * P, xp)
            for o, (_, tgt, src) in enumerate(pairs):
                # full square operator (|k|, |m| ≤ P): the total-degree truncation
                # |k| + |m| ≤ P is 11× cheaper at P = 12 but 50× less accurate here
                Lc[tgt] += apply_to_boxes(T[o][idx] * binom, M[src], xp)
            Lc *= wdeg[None, :, None]
        clock.lap(f"m2l_{level}")
        return xp.ascontiguousarray(Lc)

    def gather_operands(self, Mt, mdt):
        """(Mcm, Mcc) of a level's multipoles Mt (r, S, 3) for :meth:`class_products`: Mcm
        (r, S + 1, 3) in ``mdt`` with a zero column S (outside the grid), Mcc its copy."""
        xp = self.device.xp
        Mcm = xp.concatenate([Mt.astype(mdt), xp.zeros((Mt.shape[0], 1, 3), mdt)], axis=1)
        return Mcm, self.gather_copy(Mcm)

    def gather_copy(self, Mcm):
        """Mcm (r, S + 1, 3) in the layout that :meth:`gathered_product` gathers from:
        here (3, S + 1, r), each box's coefficients of a component contiguous."""
        return np.ascontiguousarray(Mcm.transpose(2, 1, 0))

    def gathered_product(self, Kp, Mcm, Mcc, g, mdt):
        """Y (r, nj, 3) = Kp (r, ns·r) · [Mcm[:, g[o, j], :]]_{o, j}: the class GEMM of one
        chunk of target boxes against offset-major cores; g (ns, nj): source columns per
        offset and target box.  Per component the operand is gathered transposed, (nj,
        ns·r), whole r-blocks of Mcc at a time."""
        r = Kp.shape[0]
        ns, nj = g.shape
        gt = np.ascontiguousarray(g.T)
        Y = np.empty((r, nj, 3), mdt)
        for c in range(3):
            Y[:, :, c] = Kp @ Mcc[c][gt].reshape(nj, ns * r).T
        return Y

    def class_products(self, Mcm, Mcc, gather, p, offsets, P, sep, mdt):
        """M2L of parity class ``p`` on compressed multipoles, in chunks of target boxes.

        Mcm (r, S + 1, 3): the level's multipoles M̂ and a zero column (index S); Mcc:
        :meth:`gather_copy` of it (both from :meth:`gather_operands`; on the GPU Mcm is
        None and Mcc box-major); gather (B_p, |O_p|): the source
        column of each target box at each of the class's ``offsets``.
        Yields (j0, j1, Y (r, j1 − j0, 3), first): the locals (times w) of target boxes
        j0..j1 of the class from one group of offsets (``first``: the group that
        assigns; later groups add).
        """
        nb = gather.shape[0]
        for part, Kp in self.core_groups(P, sep, p, offsets, mdt):
            r, sub = Kp.shape[0], offsets[part]
            first = part.start in (None, 0)
            chunk = max(1, int(self.chunk_bytes // (len(sub) * r * self.gathered_components
                                                    * np.dtype(mdt).itemsize)))
            for j0 in range(0, nb, chunk):
                j1 = min(nb, j0 + chunk)
                g = gather[j0:j1, part].T
                yield j0, j1, self.gathered_product(Kp, Mcm, Mcc, g, mdt), first

    def core_groups(self, P, sep, p, offsets, mdt):
        """(slice of ``offsets``, cores (r, r·|slice|)) of parity class ``p``'s M2L.

        The class's cores are cached, except for the wide separation on the CPU: there
        8 classes × 875 offsets would hold ~3.7 GB at P = 15, so its offsets go in
        groups (:attr:`core_group`) whose cores are cut from the unit cores when
        needed (K itself: 1331 r², 0.7 GB at P = 15)."""
        xp = self.device.xp
        radius = self.offset_radius
        if self.separation == 1 or self.cache_all_cores:
            yield slice(None), self.cache.get(
                ("m2l_class_cores", P, sep, p, mdt), lambda: class_cores(
                    E.unit_m2l_cores(P, radius, xp), offsets, xp).astype(mdt, copy=False))
            return
        step = self.core_group
        for q in range(0, len(offsets), step):
            yield slice(q, q + step), class_cores(
                E.unit_m2l_cores(P, radius), offsets[q:q + step]).astype(mdt, copy=False)

    # -- the sparse M2L (its lists are array code; its GEMMs run on the GPU) ----
    def sparse(self, tree, level, sep, Mt, P, info, mdt=np.float64):
        """Compressed locals (r, B, 3) from the non-empty source boxes only (GPU)."""
        raise RuntimeError("the sparse M2L runs on the GPU only (vortexsim.fmm.cuda.CudaM2L).")

    def sparsity(self, tree, P, capacity=None, counts=None, prepared=None, targets=None):
        """Per level: None (dense M2L), (per class: (n_active, active list), colmap, tgt
        counts, GEMM output layout) or a :class:`PairLists` (the sparse M2L by offset).

        Source and target counts per box of every level come from the CSR starts; the
        numbers of non-empty source boxes per (level, parity class) cross to the host in
        one transfer (they size the GEMMs).  The lists are built on the device.

        ``capacity`` (host int array (L − 1, 8), :meth:`FMM.m2l_capacity`) replaces that
        transfer: the GEMMs get these sizes (spare rows translate box 0 and are never
        read), and an active box beyond its class's capacity is marked −2 in ``colmap``
        for ``m2l_gather_sum`` to translate on the fly; ``counts`` (same shape: the
        non-empty boxes the capacities were made from) then decides sparse or dense, and
        ``prepared`` (:attr:`M2LPlan.layouts`, made from both) brings each level's layout
        and device tables, so that the call copies nothing to the device.  Without
        ``capacity``, the pair counts of the sparse M2L by offset (GPU) come in the same
        transfer; with it, only ``prepared`` layouts (a plan's) can hold that variant.

        ``targets``: :func:`~vortexsim.fmm.targets.target_boxes` of the tree, or None.  A
        level whose boxes leading to targets are fewer than :attr:`target_dense_ratio`
        times its non-empty source boxes, and at least :attr:`target_dense_min_boxes`,
        takes the dense M2L into those boxes instead of the sparse M2L: the dense class
        GEMMs then run over the target boxes, the sparse ones over every source box (a
        rank's Morton share of a run whose sources fill a quarter of the root cube: half
        or a quarter of the sparse M2L's work).  Fewer boxes stay sparse: there the
        dense path's launches per class cost more than its work saves (one H200,
        2^24 blobs: a quarter share's level 4 took 5.3 ms dense, 2.1 ms sparse).
        """
        xp = self.device.xp
        L = tree.depth
        src = {L: xp.diff(tree.src_start)}
        tgt = {L: xp.diff(tree.tgt_start)}
        for level in range(L, 2, -1):
            src[level - 1] = src[level].reshape(-1, 8).sum(axis=1)
            tgt[level - 1] = tgt[level].reshape(-1, 8).sum(axis=1)
        levels = list(range(2, L + 1))
        flags = {level: (src[level] > 0).reshape(-1, 8) for level in levels}
        pair_caps = {}
        if capacity is None:
            active = xp.stack([flags[level].sum(axis=0) for level in levels]).ravel()
            # the pair counts of the sparse M2L by offset, in the same transfer
            pair_levels = self.pair_levels(levels)
            pc = [self.pair_counts(src[level], tgt[level], level,
                                   self.separation_at(level, L)) for level in pair_levels]
            host = xp.concatenate([active] + pc).get()             # one transfer
            active = host[:8 * len(levels)].reshape(len(levels), 8)
            pair_caps = self.pair_caps_of(pair_levels, host[8 * len(levels):], L)
        else:
            active = np.asarray(capacity, dtype=np.int64).reshape(len(levels), 8)
        out = {}
        for row, level in enumerate(levels):
            B = 8 ** level
            listed = None if targets is None else targets.get(level)
            k = None if listed is None else listed.boxes.shape[0]
            sources = int((active if counts is None else counts)[row].sum())
            if k is not None and self.target_dense_min_boxes <= k < \
                    self.target_dense_ratio * sources:
                out[level] = None          # dense into the target boxes: no sparse layout
                continue
            if prepared is not None and level in prepared:
                layout, tables = prepared[level] or (None, None)
            else:
                # the stream is idle after the transfer above (or a test's call):
                # host-to-device copies cost no stall here
                layout = self.sparse_layout(L, level, P, active[row], None if counts is None
                                            else int(counts[row].sum()),
                                            pair_caps.get(level))
                tables = None if layout is None else tuple(xp.asarray(a)
                                                           for a in layout["tables"])
            if layout is None:
                out[level] = None
                continue
            if layout.get("pairs"):
                out[level] = PairLists(src[level], tgt[level], layout, tables)
                continue
            rows, start = layout["rows"], layout["start"]
            d_base, d_rows, d_first, d_spare = tables
            yinfo = (layout["unified"], layout["y_size"], d_base)
            f = flags[level]
            pos = xp.cumsum(f, axis=0) - 1                         # column within the class
            if capacity is None:
                colmap = xp.where(f, pos, -1).reshape(B)
                buf = xp.empty(int(start[-1]), dtype=xp.int64)
            else:
                fit = f & (pos < d_rows)
                colmap = xp.where(fit, pos, xp.where(f, -2, -1)).reshape(B)
                f = fit
                buf = xp.zeros(int(start[-1]), dtype=xp.int64)    # spare rows: box 0
            slot = xp.where(f, d_first + pos, d_spare)
            buf[slot.reshape(B)] = xp.arange(B, dtype=xp.int64)
            classes = [(int(rows[p]), buf[start[p]:start[p] + rows[p]]) for p in range(8)]
            out[level] = (classes, colmap, tgt[level], yinfo)
        return out

    def sparse_layout(self, L, level, P, rows, n_box=None, pair_caps=None):
        """Host layout of one level's sparse M2L, or None where the dense M2L is used.

        ``pair_caps`` (4,): the pair capacities per bucket of the sparse M2L by offset
        (:meth:`pair_bucket_caps`; None: not known, not considered); where its modelled
        cost is the lower (or :attr:`sparse_pairs` is True), the layout is
        :meth:`pair_layout`'s.

        rows (8,): GEMM rows per parity class (the non-empty source boxes, or a plan's
        capacities); n_box: the non-empty boxes that decide sparse or dense (default:
        the rows' sum).  Returns a dict: ``unified`` (one GEMM against all 343 cores, or
        one per class), ``y_size`` (elements of the GEMM output), ``rows`` (8,),
        ``start`` (9,) (list slots, one spare per class) and ``tables``, the int64
        arrays the device needs: (2, 8) output bases and strides, (8,) rows, (8,) first
        slots, (8,) spare slots.
        """
        B = 8 ** level
        r = (P + 1) ** 2
        mdt = self.gemm_dtype()
        item = np.dtype(mdt).itemsize
        sep = self.separation_at(level, L)
        widths = np.array([k.shape[1] for k in self.sparse_tables(P, sep, mdt)["Kt"]],
                          dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int64)
        n_tot = int(rows.sum())
        # dense where most boxes hold sources; small levels (sparse GEMM output ≤ 1 GB)
        # up to 90 %: their dense per-class GEMMs have only 3·B/8 columns (docs)
        small = 3 * n_tot * int(widths[0]) * item <= 1 << 30
        n_box = n_tot if n_box is None else n_box
        limit = min(0.9, 1.8 * self.sparse_fraction) if small \
            else self.sparse_fraction
        if n_box >= limit * B:
            return None
        # one GEMM against all 343 cores (read once) or one per source class (189
        # cores each, read 8 times): modelled time = flops / 25 TF/s + bytes / 2.5 TB/s
        w0 = int(widths[0])
        cost_cls = (6 * n_tot * r * w0 / 2.5e13
                    + (8 * w0 * r + 6 * n_tot * w0) * item / 2.5e12)
        cost_all = (6 * n_tot * r * 343 * r / 2.5e13
                    + (343 * r * r + 6 * n_tot * 343 * r) * item / 2.5e12)
        unified = cost_all < cost_cls and 3 * n_tot * 343 * r * item <= 1 << 30
        if self.sparse_unified is not None:                   # tests force either variant
            unified = bool(self.sparse_unified)
        if (pair_caps is not None and self.sparse_pairs is not False
                and level <= self.PAIRS_MAX_LEVEL):
            pairs = self.pair_layout(P, sep, pair_caps, mdt)
            if self.sparse_pairs or pairs["cost"] < (cost_all if unified else cost_cls):
                return pairs
        ystride = np.full(8, 343 * r, dtype=np.int64) if unified else widths
        ybase = np.concatenate([[0], np.cumsum(3 * rows * ystride)[:-1]])
        start = np.concatenate([[0], np.cumsum(rows + 1)])    # one spare slot per class
        return {"unified": unified, "y_size": int(3 * (rows * ystride).sum()),
                "rows": rows, "start": start,
                "tables": (np.stack([ybase, ystride]).astype(np.int64), rows.copy(),
                           start[:8].astype(np.int64), (start[1:] - 1).astype(np.int64))}

    def sparse_tables(self, P, sep, mdt=np.float64):
        """Cached tables of the sparse M2L: per source class c the stacked transposed cores
        Kt_c (r, |O'_c| r), and per target class p, for each of its offsets q, the source
        class and row block (int32 arrays)."""
        def build():
            xp = self.device.xp
            K = E.unit_m2l_cores(P, 3, xp)
            r = K.shape[0]
            # transposed cores by offset: Kt[j, o, i] = K[i, o r + j] (one strided copy)
            Kt3 = K.reshape(r, len(OFFSETS_3), r).transpose(2, 1, 0)

            def stacked(offsets):              # [K_o1ᵀ K_o2ᵀ …] (r, |offsets| r), C order
                return xp.ascontiguousarray(Kt3[:, xp.asarray(offsets), :]).reshape(
                    r, len(offsets) * r).astype(mdt, copy=False)
            bits = np.array([[p & 1, (p >> 1) & 1, (p >> 2) & 1] for p in range(8)])
            offidx = -np.ones((8, len(OFFSETS_3)), dtype=np.int64)
            Kt = []
            for c in range(8):
                tpar = (bits[c][None, :] - OFFSETS_3) % 2         # the targets' parity
                ok = np.nonzero(interacts(tpar, OFFSETS_3, sep))[0]
                offidx[c, ok] = np.arange(len(ok))
                Kt.append(stacked(ok))
            q = []
            for p in range(8):
                offsets = np.nonzero(interacts(bits[p], OFFSETS_3, sep))[0]
                cls = ((bits[p][None, :] + OFFSETS_3[offsets]) % 2) @ np.array([1, 2, 4])
                idx = offidx[cls, offsets]
                assert (idx >= 0).all()
                q.append((cls.astype(np.int32), idx.astype(np.int32)))
            # every class has as many offsets (parity reflections map them one to one)
            q_all = tuple(xp.asarray(np.stack([t[i] for t in q])) for i in (0, 1))
            # the unified variant: row block = the offset's index in OFFSETS_3
            raw = np.stack([np.nonzero(interacts(bits[p], OFFSETS_3, sep))[0]
                            for p in range(8)]).astype(np.int32)
            # C order: m2l_gather_sum's overflow path indexes it
            Kt_all = xp.ascontiguousarray(stacked(np.arange(len(OFFSETS_3))))
            return {"Kt": Kt, "q_all": q_all, "Kt_all": Kt_all,
                    "q_all_raw": (q_all[0], xp.asarray(raw))}
        return self.cache.get(("sparse_m2l", P, sep, np.dtype(mdt).name), build)
