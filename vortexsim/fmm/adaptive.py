"""Adaptive octree for the FMM: each target gets its leaf at the level where its box
holds few points, so that clustered inputs (a Plummer cloud, rings with tracers) cost
about what uniform ones do.

The tree (``build_adaptive``) refines a box while it holds more than ``leaf_size``
points (sources + targets) and lies above the deepest level ``L`` (where the leaves are
still as wide as the near field's reach); levels 0 and 1 are always refined.  Boxes are
addressed by Morton keys at their level, and every level keeps only compact, sorted key
lists (memory O(N + M)), never a dense array of 8^level boxes.

What the evaluation does, level by level (ρ: the separation, 1 or 2; a leaf's near
stencil is the (2ρ+1)³ boxes around it at its own level):

- targets: ``A_l`` are the boxes at level l that hold targets and whose parent is
  refined; those not refined are the leaves of level l.  A target's local expansion is
  the sum over its ancestors (levels 2..its leaf's) of their M2L, passed down by L2L;
  at its leaf, L2P adds it to the near field of the (2ρ+1)³ boxes around the leaf at
  the leaf's level (all sources there, however finely those boxes are refined).
- sources: ``S_l`` are the boxes at level l that hold sources and whose parent lies
  within ρ boxes of a refined box: exactly the boxes that the M2L lists of ``A_l`` can
  name (children of the parent's neighbours).  A box of ``S_l`` that lies itself within
  ρ boxes of a refined box has all its non-empty children in ``S_{l+1}`` and gets its
  multipole by M2M; every other gets it by P2M from its own points (each source is
  expanded once).
- M2L at every level between boxes ``A_l`` and ``S_l`` whose parents are within ρ boxes
  of each other and which are more than ρ boxes apart (the level-uniform FMM's rule),
  as one GEMM per parity class and chunk with the cached class cores.

So every (target, source) pair is counted once: in the near field of the target's leaf
or in the M2L of exactly one of its ancestors, as in the level-uniform FMM, whose
result this equals to round-off when no box is refined below the uniform depth.
The far field is the compressed 1/r one (singular, gaussian, polynomial kernels).

Reference for the lists: Carrier, Greengard & Rokhlin (1988), "A fast adaptive
multipole algorithm for particle simulations"; here the W and X lists are folded into
the near field of the target leaf's level and into the M2L of the source boxes'
level, which a level-by-level source set makes possible without 2:1 balancing.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..kernels.morton import morton_keys
from . import cuda
from . import expansions as E
from .downward import TargetPart
from ..backend import stable_argsort
from .tree import morton_decode, morton_encode

__all__ = ["AdaptiveTree", "AdaptiveLevel", "LevelTargets", "build_adaptive", "adaptive_fmm",
           "near_adaptive", "far_adaptive", "decode_tagged", "shifted", "centres",
           "ADAPTIVE_MAX_DEPTH"]

#: deepest level of an adaptive tree (keys of 3 × 10 bits)
ADAPTIVE_MAX_DEPTH = 10


@dataclasses.dataclass(eq=False)
class AdaptiveLevel:
    """One level l of an :class:`AdaptiveTree` (device arrays, int64 unless said).

    width: box edge [L].  occ (n_O,): sorted keys of the boxes holding sources,
    src_start (n_O + 1,): their CSR into the sorted sources.  s_keys (n_S,): the boxes
    with multipoles (sorted); m2m (k,): those made by M2M (indices into s_keys) and
    children (k, 8): their children's indices into the next level's s_keys (its n_S for
    none); p2m (j,): those made by P2M, p2m_points (·,): their sources' sorted indices
    in box order, p2m_start (j + 1,).  a_keys (n_A,): target boxes (sorted), parent
    (n_A,): index into the level above's a_keys, classes: per parity class p = key & 7,
    (rows (n_Ap,) into a_keys, gather (n_Ap, |O_p|) into s_keys (n_S: none)).
    leaves (n_leaf,): the leaves among a_keys; tgt_start (n_leaf + 1,): their CSR into
    this level's block of sorted targets t0..t1; nbr (n_leaf, (2ρ+1)³): the near
    stencil as indices into occ (−1 none), the middle column the leaf itself.
    p2m_centres (j, 3), leaf_centres (n_leaf, 3): box centres [L] (float64).
    """
    level: int
    width: float
    occ: object
    src_start: object
    s_keys: object
    m2m: object
    children: object
    p2m: object
    p2m_points: object
    p2m_start: object
    a_keys: object
    parent: object
    classes: list
    leaves: object
    tgt_start: object
    t0: int
    t1: int
    nbr: object
    p2m_centres: object
    leaf_centres: object


@dataclasses.dataclass(eq=False)
class AdaptiveTree:
    """Sources sorted by Morton key (src_order (N,)), targets sorted by (leaf level,
    key) (tgt_order (M,)), and the levels 2..depth (:class:`AdaptiveLevel`)."""
    lo: object
    width: float
    depth: int
    leaf_size: int
    src_order: object
    tgt_order: object
    levels: dict

    @property
    def n_boxes(self):
        """Target boxes (those that get local expansions) over all levels."""
        return sum(int(lv.a_keys.shape[0]) for lv in self.levels.values())


def _tag(level):
    """The level tag 1 << 3l of keys at ``level`` (tagged key: key | tag)."""
    return 1 << (3 * level)


def _level_of(tagged, tags, xp):
    """Levels (≥ 2) of level-tagged keys ``tagged`` (any shape, ≥ 0); ``tags``: the
    tags of levels 2, 3, ... (sorted, on the keys' device)."""
    return xp.searchsorted(tags, tagged, side="right") + 1


def decode_tagged(keys):
    """(cell coordinates (n, 3) int64, levels (n,)) of level-tagged keys (NumPy; the
    CUDA twin is ``decode_tagged`` in ``kernels/cuda/adaptive_keys.cuh``)."""
    lev = _level_of(keys, np.array([_tag(lv) for lv in range(1, 12)], dtype=np.int64), np) - 1
    k0 = keys ^ np.left_shift(np.int64(1), 3 * lev)
    ijk = np.stack(morton_decode(k0.astype(np.uint64), ADAPTIVE_MAX_DEPTH, np), axis=1)
    return ijk.astype(np.int64), lev


def shifted(keys, offsets, xp):
    """Tagged keys (n, k) of the boxes at ``offsets`` (k, 3) from the boxes of tagged
    keys ``keys`` (n,) (levels 1..10, each at its own level), −1 outside the grid
    (GPU: :func:`vortexsim.fmm.cuda.shifted_tagged`)."""
    if xp is not np:
        return cuda.shifted_tagged(keys, offsets)
    ijk, lev = decode_tagged(keys)
    q = ijk[:, None, :] + np.asarray(offsets, dtype=np.int64)[None, :, :]
    n = np.left_shift(np.int64(1), lev)[:, None, None]
    inside = np.all((q >= 0) & (q < n), axis=2)
    q = np.minimum(np.maximum(q, 0), n - 1)
    out = (morton_encode(q[..., 0], q[..., 1], q[..., 2], np).astype(np.int64)
           | np.left_shift(np.int64(1), 3 * lev)[:, None])
    return np.where(inside, out, np.int64(-1))


def _run_bounds(a, xp):
    """(first-of-run flags, run starts, run ends) of the equal runs of the sorted ``a``."""
    first = xp.ones(a.shape, dtype=bool)
    first[1:] = a[1:] != a[:-1]
    starts = xp.nonzero(first)[0]
    ends = xp.concatenate([starts[1:], xp.asarray([a.shape[0]], dtype=starts.dtype)])
    return first, starts, ends


def _csum0(a, xp):
    """[0, cumsum(a)] (int64)."""
    return xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(a, dtype=xp.int64)])


def _runs(a, xp, counts=None):
    """(distinct values, their counts (or sums of ``counts``), first-of-run flags) of
    the sorted array ``a``."""
    first, starts, ends = _run_bounds(a, xp)
    if counts is None:
        return a[starts], (ends - starts).astype(xp.int64), first
    csum = _csum0(counts, xp)
    return a[starts], csum[ends] - csum[starts], first


def _all_levels(box, counts, L, xp, box_lev=None, keep=None):
    """The distinct boxes of levels 2..L above the sorted, distinct level-L boxes
    ``box``, as one sorted array of level-tagged keys (key | 1 << 3l: level-major,
    then Morton order), and the sums of ``counts`` over each.  With ``box_lev`` (the
    leaf level of each level-L box) only boxes whose targets have their leaf at that
    level or below (``keep="ge"``) or exactly there (``"eq"``) are kept; within a box of
    level l all targets agree on that (leaves, refined boxes and boxes inside coarser
    leaves hold one kind of target each).
    """
    if box.shape[0] == 0:
        empty = xp.zeros(0, dtype=xp.int64)
        return empty, empty
    levels = range(2, L + 1)
    tagged = xp.concatenate([(box >> (3 * (L - lv))) | _tag(lv) for lv in levels])
    _, starts, ends = _run_bounds(tagged, xp)
    csum = _csum0(xp.tile(counts, len(levels)), xp)
    keys, sums = tagged[starts], csum[ends] - csum[starts]
    if keep is not None:
        run_level = starts // box.shape[0] + 2
        lev = box_lev[starts % box.shape[0]]             # the run's first member's
        ok = lev >= run_level if keep == "ge" else lev == run_level
        keys, sums = keys[ok], sums[ok]
    return keys, sums


def _member(sorted_keys, q, xp):
    """(found, index) of keys ``q`` in the sorted array ``sorted_keys``."""
    if sorted_keys.shape[0] == 0:
        return xp.zeros(q.shape, dtype=bool), xp.zeros(q.shape, dtype=xp.int64)
    i = xp.minimum(xp.searchsorted(sorted_keys, q), sorted_keys.shape[0] - 1)
    return sorted_keys[i] == q, i.astype(xp.int64)


def build_adaptive(x, y, lo, width, depth, leaf_size, radius, class_offsets, xp, lap=None,
                   near=None):
    """The adaptive tree of sources ``x`` (N, 3) and targets ``y`` (M, 3) [L] in the
    cube ``[lo, lo + width)³``, refined while a box holds more than ``leaf_size``
    points down to level ``depth`` (≥ 2); ``radius``: the separation ρ (near stencil
    and parent radius); ``class_offsets``: per parity class the M2L offsets (8 arrays
    (|O_p|, 3) in box widths).  Array code on NumPy or CuPy.

    All levels are built at once on level-tagged keys (key | 1 << 3l; the parent of a
    tagged key is ``key >> 3``, its children ``(key << 3) + c``), so that the work and
    the host round trips (~12, one for all the levels' sizes) do not grow with the
    depth; the per-level arrays are slices of the all-level ones.
    ``lap``: optional callable(name) called after each step (profiling).
    ``near``: optional callable(src_order, tgt_order, views) called as soon as the near
    field's lists exist, before the source side of the tree is built; views: level →
    (:class:`LevelTargets`, t0, t1, nbr) for the levels holding leaves with targets
    (so that the near field can run on the GPU while the host builds the rest).
    """
    lap = lap or (lambda name: None)
    L = int(depth)
    if not 2 <= L <= ADAPTIVE_MAX_DEPTH:
        raise ValueError(f"depth must be in [2, {ADAPTIVE_MAX_DEPTH}], got {depth!r}.")
    i64 = xp.int64
    # keys on the finest grid (Z-order within the leaves too; 30 bits sort as uint32);
    # every count below is made once at level L and summed up box-wise
    F = ADAPTIVE_MAX_DEPTH
    shift = 3 * (F - L)
    ks = morton_keys(x, lo, width, F, xp).astype(xp.uint32)
    src_order = stable_argsort(ks, xp)
    ks = ks[src_order].astype(i64)
    kt = morton_keys(y, lo, width, F, xp).astype(xp.uint32)
    by_key = stable_argsort(kt, xp)                     # targets in key order
    kt = kt[by_key].astype(i64)
    lap("keys")
    box_s, cnt_s, _ = _runs(ks >> shift, xp)
    tgt_box, tgt_cnt, tgt_first = _runs(kt >> shift, xp)     # the targets' level-L boxes
    both = xp.concatenate([box_s, tgt_box])
    by_box = stable_argsort(both, xp)
    box_a, cnt_a, _ = _runs(both[by_box], xp, xp.concatenate([cnt_s, tgt_cnt])[by_box])
    occ, src_cnt = _all_levels(box_s, cnt_s, L, xp)
    all_box, all_cnt = _all_levels(box_a, cnt_a, L, xp)
    lap("counts")
    # refined boxes (levels 2..L−1) and the leaf level of each target box of level L
    # (2 + its refined ancestors: a refined box's parent is refined) and of each target
    refined = all_box[(all_cnt > leaf_size) & (all_box < _tag(L))]
    if L > 2 and tgt_box.shape[0]:
        anc = xp.concatenate([(tgt_box >> (3 * (L - lv))) | _tag(lv) for lv in range(2, L)])
        box_lev = 2 + _member(refined, anc, xp)[0].reshape(L - 2, -1).sum(axis=0)
    else:
        box_lev = xp.full(tgt_box.shape, 2, dtype=i64)
    lev_k = box_lev[xp.cumsum(tgt_first) - 1] if kt.shape[0] else box_lev
    # targets sorted by (leaf level, key): each level's leaves hold a contiguous block
    tgt_order = by_key[stable_argsort(lev_k, xp)]
    # target boxes (holding targets whose leaf is there or below), the leaves and their
    # targets' CSR into the sorted targets (leaves sorted by level, then key, as these)
    a_all, _ = _all_levels(tgt_box, tgt_cnt, L, xp, box_lev, "ge")
    leaf_all, leaf_cnt = _all_levels(tgt_box, tgt_cnt, L, xp, box_lev, "eq")
    tgt_start = _csum0(leaf_cnt, xp)
    lap("refine")
    # the near field's lists: each leaf's (2ρ+1)³ stencil as indices into occ of its
    # level, and the level bounds of occ, the leaves and the targets (one transfer)
    tags = xp.asarray(np.array([_tag(lv) for lv in range(2, L + 2)], dtype=np.int64))
    G = _csum0(src_cnt, xp)                     # CSR of occ into the sources, + N·(l − 2)
    ob, lb = xp.searchsorted(occ, tags), xp.searchsorted(leaf_all, tags)
    lev_l = _level_of(leaf_all, tags, xp)
    found, idx = _member(occ, shifted(leaf_all, E.offsets_cube(radius), xp), xp)
    nbr = xp.where(found, idx - ob[lev_l[:, None] - 2], i64(-1))   # (−1 is never found)
    sizes = xp.concatenate([ob, lb, tgt_start[lb]]).tolist()
    nl = L - 1
    ob_h, lb_h, tb_h = (sizes[i * (nl + 1):(i + 1) * (nl + 1)] for i in range(3))
    src_starts, tgt_starts, views = {}, {}, {}
    for i, level in enumerate(range(2, L + 1)):
        o0, o1, l0, l1 = ob_h[i], ob_h[i + 1], lb_h[i], lb_h[i + 1]
        ss, ts = G[o0:o1 + 1], tgt_start[l0:l1 + 1]
        src_starts[level], tgt_starts[level] = ss - ss[:1], ts - ts[:1]
        if tb_h[i + 1] > tb_h[i]:
            views[level] = (LevelTargets(src_starts[level], tgt_starts[level], l1 - l0, level),
                            int(tb_h[i]), int(tb_h[i + 1]), nbr[l0:l1])
    lap("near_lists")
    if near is not None:
        near(src_order, tgt_order, views)
    # boxes with multipoles: those of level 2 and those whose parent lies within ρ boxes
    # of a refined box; those within ρ of a refined box themselves get theirs by M2M
    expand = (xp.sort(shifted(refined, E.offsets_cube(radius), xp).ravel())
              if refined.shape[0] else refined)
    s_idx = xp.nonzero((occ < _tag(3)) | _member(expand, occ >> 3, xp)[0])[0]
    s_all = occ[s_idx]
    in_expand = _member(expand, s_all, xp)[0]
    m2m_all = xp.nonzero(in_expand)[0]
    p2m_all = xp.nonzero(~in_expand)[0]
    lap("sources")
    # the source side's sizes, in one transfer: level bounds of s_all, a_all, m2m_all,
    # p2m_all and of the P2M points; class sizes per (parity, level)
    sb, ab = xp.searchsorted(s_all, tags), xp.searchsorted(a_all, tags)
    mb, pb = xp.searchsorted(m2m_all, sb), xp.searchsorted(p2m_all, sb)
    lev_a = _level_of(a_all, tags, xp)
    cls_key = (a_all & 7) * 16 + lev_a
    by_class = stable_argsort(cls_key, xp)
    cls_n = (xp.bincount(cls_key, minlength=8 * 16) if a_all.shape[0]
             else xp.zeros(8 * 16, dtype=i64))
    lev_p = _level_of(s_all[p2m_all], tags, xp)
    p2m_box = s_idx[p2m_all]
    p2m_start = _csum0(G[p2m_box + 1] - G[p2m_box], xp)
    sizes = xp.concatenate([sb, ab, mb, pb, p2m_start[pb], cls_n]).tolist()
    sb_h, ab_h, mb_h, pb_h, ppb_h = (sizes[i * (nl + 1):(i + 1) * (nl + 1)] for i in range(5))
    cls_n = np.asarray(sizes[5 * (nl + 1):]).reshape(8, 16)
    lap("sizes")
    # every source is expanded once, by P2M at exactly one level (so p2m_start[-1] = N)
    n_src = int(x.shape[0])
    pos = xp.arange(n_src, dtype=i64)
    owner = xp.searchsorted(p2m_start, pos, side="right") - 1
    first_src = G[p2m_box] - n_src * (lev_p - 2)
    p2m_points = first_src[owner] + (pos - p2m_start[owner])
    lap("p2m_points")

    def local(idx, bounds, lev):
        """Global indices ``idx`` into an all-level array → indices within its level
        (``bounds``: the array's level bounds on the device, ``lev``: idx's levels)."""
        return idx - bounds[lev - 2]

    n_s = sb[1:] - sb[:-1]
    parent = xp.where(lev_a > 2, local(_member(a_all, a_all >> 3, xp)[1], ab,
                                       xp.maximum(lev_a - 1, 2)), 0)
    # the M2L sources of each target box at the union of the classes' offsets (one
    # lookup), as indices into its level's s_keys (n_S of the level: none)
    union, where = np.unique(np.concatenate(class_offsets), axis=0, return_inverse=True)
    splits = np.cumsum([len(o) for o in class_offsets])[:-1]
    found, idx = _member(s_all, shifted(a_all, union, xp), xp)
    lev_col = lev_a[:, None]
    col = xp.where(found, local(idx, sb, lev_col),
                   n_s[lev_col - 2])
    rows = local(by_class, ab, lev_a[by_class])
    cls_start = np.concatenate([[0], np.cumsum(cls_n.ravel())])
    cols = xp.asarray(where.ravel())
    gathers = []
    for p, (c0, c1) in enumerate(zip(np.r_[0, splits], np.r_[splits, where.size])):
        a, b = cls_start[16 * p], cls_start[16 * p + 16]
        gathers.append(col[by_class[a:b]][:, cols[c0:c1]])
    lap("classes")
    leaves = local(_member(a_all, leaf_all, xp)[1], ab, lev_l)
    lev_m = _level_of(s_all[m2m_all], tags, xp)
    kids = (s_all[m2m_all][:, None] << 3) + xp.arange(8, dtype=i64)[None, :]
    found, idx = _member(s_all, kids, xp)
    children = xp.where(found, local(idx, sb, lev_m[:, None] + 1),
                        n_s[lev_m[:, None] - 1])
    m2m_local = local(m2m_all, sb, lev_m)
    p2m_local = local(p2m_all, sb, lev_p)
    p2m_centres = centres(s_all[p2m_all], lo, width, xp)
    leaf_centres = centres(leaf_all, lo, width, xp)
    lap("lists")

    levels = {}
    for i, level in enumerate(range(2, L + 1)):
        o0, o1, s0, s1, a0, a1 = ob_h[i], ob_h[i + 1], sb_h[i], sb_h[i + 1], ab_h[i], ab_h[i + 1]
        m0, m1, p0, p1, l0, l1 = mb_h[i], mb_h[i + 1], pb_h[i], pb_h[i + 1], lb_h[i], lb_h[i + 1]
        classes = []
        for p in range(8):
            j = int(cls_start[16 * p + level])
            c0 = j - int(cls_start[16 * p])
            c1 = c0 + int(cls_n[p, level])
            classes.append((rows[j:j + c1 - c0], gathers[p][c0:c1]))
        ps = p2m_start[p0:p1 + 1]
        levels[level] = AdaptiveLevel(
            level, width / (1 << level), occ[o0:o1] ^ _tag(level), src_starts[level],
            s_all[s0:s1] ^ _tag(level), m2m_local[m0:m1], children[m0:m1], p2m_local[p0:p1],
            p2m_points[ppb_h[i]:ppb_h[i + 1]], ps - ps[:1], a_all[a0:a1] ^ _tag(level),
            parent[a0:a1], classes, leaves[l0:l1], tgt_starts[level], int(tb_h[i]),
            int(tb_h[i + 1]), nbr[l0:l1], p2m_centres[p0:p1], leaf_centres[l0:l1])
    return AdaptiveTree(lo, float(width), L, int(leaf_size), src_order, tgt_order, levels)


@dataclasses.dataclass(eq=False)
class LevelTargets:
    """The near field's and L2P's view of one level's leaves (as an Octree would be)."""
    src_start: object
    tgt_start: object
    n_leaves: int
    depth: int


def centres(keys, lo, width, xp):
    """Centres (n, 3) [L] of the boxes of level-tagged keys ``keys`` (n,) (each at its
    own level) of the cube [lo, lo + width)³ (GPU: :func:`vortexsim.fmm.cuda.tagged_centres`)."""
    out = xp.empty((keys.shape[0], 3))
    if keys.shape[0] == 0:
        return out
    if xp is not np:
        return cuda.tagged_centres(keys, lo, width, out)
    ijk, lev = decode_tagged(keys)
    return lo + (ijk.astype(np.float64) + 0.5) * (width / np.left_shift(1, lev))[:, None]


def near_adaptive(near, views, xs, alpha_s, sigma_s, ys, u, g, exclude_self, uniform):
    """Near field of every level's leaves into u (M, 3), g (M, 3, 3) or None (float64,
    sorted targets ``ys``); near: the evaluator's near-field stage
    (:class:`~vortexsim.fmm.near.NearField`); views: the ``near`` argument of
    :func:`build_adaptive`."""
    for view, t0, t1, nbr in views.values():
        uu, gg = near(view, xs, alpha_s, sigma_s, ys[t0:t1], exclude_self,
                      g is not None, None, uniform, nbr=nbr)
        u[t0:t1] = uu
        if g is not None:
            g[t0:t1] = gg


def adaptive_fmm(stages, x, alpha, sigma, y, lo, width, depth, leaf_size, exclude_self,
                 gradient, uniform, P, clock):
    """u (M, 3) and ∇u (M, 3, 3) (or None), float64, in the caller's target order, of
    sources x, alpha (N, 3), sigma (N,) at targets y (M, 3) on the adaptive tree of
    the cube [lo, lo + width)³ (:func:`build_adaptive`); ``stages``: the evaluator's
    :class:`~vortexsim.fmm.stages.Stages` (its operators, kernels and caches).

    On the GPU the near field runs on a second stream as soon as its lists exist,
    while the host builds the source side of the tree and enqueues the far field
    (unless ``clock`` synchronizes, for stage times).
    """
    xp = stages.operators.device.xp
    m = y.shape[0]
    u = xp.zeros((m, 3))
    g = xp.zeros((m, 3, 3)) if gradient else None
    m2l = stages.m2l
    vectors = m2l.class_vectors()
    side = stages.backend.side_stream(clock.sync)
    st = {}

    def near(src_order, tgt_order, views):
        st.update(xs=x[src_order], alpha_s=alpha[src_order], sigma_s=sigma[src_order],
                  ys=y[tgt_order], views=views)
        if side is None:
            return
        side.wait_event(xp.cuda.get_current_stream().record())
        with side:
            near_adaptive(stages.near, views, st["xs"], st["alpha_s"], st["sigma_s"],
                          st["ys"], u, g, exclude_self, uniform)
            st["done"] = side.record()

    try:
        tree = build_adaptive(x, y, lo, width, depth, leaf_size, m2l.separation, vectors, xp,
                              near=near)
        clock.lap("tree")
        if side is None:
            near_adaptive(stages.near, st["views"], st["xs"], st["alpha_s"], st["sigma_s"],
                          st["ys"], u, g, exclude_self, uniform)
            clock.lap("near")
        far_adaptive(stages, tree, st["views"], st["xs"], st["alpha_s"], st["ys"], u, g, P,
                     clock, st.get("done"))
    finally:
        # also when something raised: the arrays the side stream reads and writes go
        # back to the main stream's memory pool only after it has finished
        if "done" in st:
            xp.cuda.get_current_stream().wait_event(st["done"])
    out_u = xp.empty_like(u)
    out_u[tree.tgt_order] = u
    out_g = None
    if gradient:
        out_g = xp.empty_like(g)
        out_g[tree.tgt_order] = g
    return out_u, out_g, tree


def far_adaptive(stages, tree, views, xs, alpha_s, ys, u, g, P, clock, near_done=None):
    """The far field (P2M, M2M, M2L, L2L, L2P) of the adaptive ``tree`` added into the
    sorted targets' u, g; ``views``: the build's per-level target views (its ``near``
    argument); ``near_done``: the near field's event (GPU side stream), waited for
    before L2P adds into u, g."""
    ops, m2l = stages.operators, stages.m2l
    xp = ops.device.xp
    L, levels = tree.depth, tree.levels
    Tc, Rc = ops.compressed_shift(P)
    r = Tc.shape[0]
    multipoles = {}
    for level in range(L, 1, -1):                     # P2M and M2M, leaves upward
        lv = levels[level]
        Mh = xp.zeros((r, lv.s_keys.shape[0] + 1, 3))          # last column: zero
        nb = int(lv.p2m.shape[0])
        if nb:
            M = stages.upward.p2m(xs[lv.p2m_points], alpha_s[lv.p2m_points], lv.p2m_start,
                                  lv.p2m_centres, lv.width, P)
            Mh[:, lv.p2m, :] = ops.compress(M, P)
        clock.lap(f"p2m_{level}")
        k = int(lv.m2m.shape[0])
        if k:
            X = multipoles[level + 1][:, lv.children, :]          # (r, k, 8, 3)
            X = X.transpose(2, 0, 1, 3).reshape(8 * r, k * 3)
            Mh[:, lv.m2m, :] = (Tc @ X).reshape(r, k, 3)
        multipoles[level] = Mh
        clock.lap(f"m2m_{level}")

    mdt = m2l.gemm_dtype()
    sep = m2l.parent_radius + 1
    class_offsets = m2l.class_offsets(sep)
    above = None
    leaf_locals = {}
    for level in range(2, L + 1):                     # M2L and L2L, root downward
        lv = levels[level]
        n_a = int(lv.a_keys.shape[0])
        Mcm = multipoles.pop(level).astype(mdt, copy=False)
        Mcc = m2l.gather_copy(Mcm)
        Lt = xp.zeros((r, n_a, 3), mdt)
        for p, (rows, gather) in enumerate(lv.classes):
            if rows.shape[0] == 0:
                continue
            for j0, j1, Y, _ in m2l.class_products(Mcm, Mcc, gather, p, class_offsets[p],
                                                   P, sep, mdt):
                Lt[:, rows[j0:j1], :] += Y
        Lh = Lt.astype(np.float64, copy=False) / lv.width
        if level > 2 and n_a:
            n_p = above.shape[1]
            Y = (Rc @ above.reshape(r, n_p * 3)).reshape(8, r, n_p, 3)
            Lh += Y[lv.a_keys & 7, :, lv.parent, :].transpose(1, 0, 2)
        above = Lh
        clock.lap(f"m2l_{level}")
        if level in views:
            leaf_locals[level] = ops.decompress(Lh[:, lv.leaves, :], P)
    if near_done is not None:
        xp.cuda.get_current_stream().wait_event(near_done)
    for level, Ll in leaf_locals.items():
        lv = levels[level]
        # (first: the block's start in the sorted targets ys; L2P does not read it)
        part = TargetPart(views[level][0], lv.t0, ys[lv.t0:lv.t1], g is not None,
                          u[lv.t0:lv.t1], g[lv.t0:lv.t1] if g is not None else None)
        stages.downward.l2p(Ll, lv.leaf_centres, lv.width, lv.tgt_start, [part], P)
        clock.lap(f"l2p_{level}")
    for stage in ("p2m", "m2m", "m2l", "l2p"):
        clock.laps[stage] = sum(v for key, v in clock.laps.items()
                                if key.startswith(stage + "_"))
