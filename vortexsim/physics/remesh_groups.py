r"""Remeshing of labelled element groups onto one lattice: free space and the ground plane.

``physics.md``, "Remeshing" and "Boundaries".  :func:`vortexsim.geometry.remesh.remesh`
interpolates one set of elements onto the lattice of spacing h with M4′.  A model's
elements carry group labels (one group per ring, −1 for none) that its per-group
diagnostics follow; :func:`remesh_groups` remeshes all of them onto ONE lattice, so that
no two new elements coincide (particle strength exchange weighs every node by its
volume h³ once), and gives every node one label.

One lattice, and the labels
---------------------------
Nodes at ``origin + (i, j, k) h``: origin 0 in free space, (0, 0, z₀) above a ground
plane.  With the groups taken in the order 0, 1, …, G−1 and then the ungrouped elements
(label −1) as one more group, the order ``slot`` = 0 … G:

1. each group is remeshed on its own on the common lattice with threshold 0
   (:func:`remesh`, which is canonical and needs no atomics): its node strengths
   α_{n,g} = Σ_{p ∈ g} W((x_n − x_p)/h) α_p and their lattice indices;
2. the union of the node keys is found by a sort (``unique``); each group scatters its
   α_{n,g} there in slot order, ``α_n ← α_n + α_{n,g}`` (within one group the nodes are
   distinct, so the scatter needs no atomics):

       α_n = (…((0 + α_{n,0}) + α_{n,1}) + …) + α_{n,G}

   which is Σ_p W α_p over all the elements: :func:`remesh` of all of them together to
   round-off (the same bits when there is one group);
3. label of node n: the group with the largest |α_{n,g}| (Euclidean norm of its own
   contribution there, compared as |α_{n,g}|²); ties go to the earlier slot, i.e. to
   the lower group index, and the ungrouped elements (−1) lose every tie;
4. the threshold, relative to max_n |α_n| of the merged nodes (after the ground cut
   below): nodes with |α_n| ≤ ``threshold`` × max |α_n| are dropped (and reported);
5. output order: by slot (group 0's nodes, then group 1's, …, then the nodes labelled
   −1), by lattice index within a slot (i slowest, k fastest): each group contiguous,
   as :meth:`VortexModel.replace_elements` needs.

Conservation: every group's remesh conserves its Ω = Σα, P = ½ Σ x × α and
A = ⅓ Σ x × (x × α) to round-off (M4′ reproduces polynomials of degree ≤ 2), so their
sum does; per group they are kept exactly only while the groups share no node.

The ground plane z = z₀
-----------------------
The flow in z > z₀ is the upper half of the mirror-symmetric free-space flow of the
elements and their images, the image of (x, y, z; α_x, α_y, α_z) being
(x, y, 2z₀ − z; −α_x, −α_y, α_z) (:func:`vortexsim.geometry.mirror`, the images of
:class:`vortexsim.geometry.GroundPlane`).  The elements are remeshed together with
their images, with the same group labels, on the lattice through the plane (origin
(0, 0, z₀), so its nodes z₀ + k h, k ∈ ℤ, are symmetric about the plane).  The images of
the elements more than 2h above the plane reach only nodes below it and are left out.
Since W is even, the remeshed field F of a mirror-symmetric set is mirror-symmetric: the
node (i, j, −k) holds the image of the strength at (i, j, k); a node on the plane is its
own image, so its tangential components vanish (to round-off: set exactly 0 here) and
its normal one is twice the elements' share.  F splits into the nodes above the plane U,
those below, mirror(U), and those on it P = mirror(P).  Kept:

* k > 0: U at full strength;
* k = 0: P at half strength, (0, 0, α_z / 2);
* k < 0: dropped.

The images of the kept set are mirror(U) and mirror(½P) = ½P, so the kept set with its
images is U + mirror(U) + P = F: the image system sees the same remeshed field, and
Ω, P and A of (elements + images) are conserved to round-off.  A node on the plane
coincides with its own image: with a regularised kernel (Gaussian: q(ρ)/ρ³ finite at
ρ = 0) the pair adds α_img × 0 = 0 to the velocity and a finite gradient, and the blob
with its image is one blob of twice the strength.

Cost: the G + 1 remeshes (O(N log N) together), one sort of the ≤ 64 N node keys and
G + 1 scatters; memory O(N).  No floating-point atomics: the same bits for the same input
and for any permutation of it (each group's remesh is canonical, the slot order is
fixed).  The same ``xp`` code runs on NumPy and CuPy.
"""
from __future__ import annotations

import math

import numpy as np

from ..backend import array_namespace, to_host
from ..geometry import mirror
from ..geometry.periodic import positive_finite
from ..geometry.remesh import (DEFAULT_OVERLAP, DEFAULT_THRESHOLD, Remeshed, check_threshold,
                               key_index, remesh, threshold_nodes)

__all__ = ["remesh_groups"]

#: the node keys of the union of the groups' lattices must stay below this (int64)
_MAX_KEY = 2 ** 62


def remesh_groups(x, alpha, group, h, *, n_groups=None, ground_z=None, threshold=None,
                  overlap=DEFAULT_OVERLAP):
    r"""Remesh labelled elements onto one lattice of spacing h (M4′); label every node.

    α_n = Σ_p W((x_n − x_p)/h) W((y_n − y_p)/h) W((z_n − z_p)/h) α_p over all the elements
    (with their images above a ground plane), the new elements at the nodes with
    σ = overlap × h, V = h³, each labelled with the group whose own share |α_{n,g}| is
    the largest (ties: the lower group index; −1 loses ties); module docstring.

    Parameters
    ----------
    x : array (N, 3) [L], positions (NumPy or CuPy, float64 or float32)
    alpha : array (N, 3) [L³/T], vector strengths, same namespace and dtype
    group : array (N,) of integers in −1 … n_groups − 1 (−1: no group), or None (all −1)
    h : float [L] > 0, the lattice spacing
    n_groups : int ≥ 0 or None, the number of groups G (default: max label + 1)
    ground_z : float [L] or None; None: free space, lattice origin 0; z₀: the ground
        plane z = z₀, lattice origin (0, 0, z₀), images included, nodes z ≥ z₀ kept (on
        the plane at half strength, normal component only)
    threshold : float in [0, 1) or None, keep the nodes with |α_n| > threshold ×
        max|α_n| (default ``DEFAULT_THRESHOLD`` = 1e-6); 0 keeps every node with α_n ≠ 0
    overlap : float > 0, σ/h of the new elements (default 1)

    Returns
    -------
    Remeshed : x (N', 3), alpha (N', 3), sigma (N',), volume (N',), index (N', 3) int64
        (x = origin + index h), group (N',) int64 labels; in slot order (groups 0 … G−1,
        then −1), lattice order within each; ``n_nodes`` counts the merged nodes before the
        threshold (above a plane: those with z ≥ z₀), ``dropped_*`` what the threshold
        removed.

    Raises
    ------
    ValueError : bad shapes, labels outside −1 … n_groups − 1, a non-finite ground_z,
        groups spread over more than 2⁶² lattice nodes, and every error of :func:`remesh`.
    TypeError : non-integer labels, mixed NumPy/CuPy, and the type errors of :func:`remesh`.

    References: Monaghan, J. Comput. Phys. 60 (1985) 253; Cottet & Koumoutsakos, *Vortex
    Methods* (2000), ch. 6–7 (remeshing, images).
    """
    xp = array_namespace(x, alpha)
    n = _check_shapes(x, alpha)
    h = positive_finite("h", h)
    overlap = positive_finite("overlap", overlap)
    threshold = check_threshold(DEFAULT_THRESHOLD if threshold is None else threshold,
                                "merged nodes")
    labels, n_groups = _check_labels(group, n, n_groups, xp)
    origin = np.zeros(3)
    if ground_z is not None:
        try:
            z0 = float(ground_z)
        except (TypeError, ValueError):
            raise TypeError(f"ground_z must be a number (the plane z = z0 [L]) or None, "
                            f"got {ground_z!r}.") from None
        if not math.isfinite(z0):
            raise ValueError(f"ground_z must be finite (the plane z = z0 [L]), got "
                             f"{ground_z!r}.")
        origin[2] = z0
        # images that can reach a node z >= z0: of the elements at most 2h above the plane
        near = xp.flatnonzero(x[:, 2] - x.dtype.type(z0) <= x.dtype.type(2.0 * h))
        x_img, alpha_img = mirror(x[near], alpha[near], z0)
        x, alpha = xp.concatenate([x, x_img]), xp.concatenate([alpha, alpha_img])
        labels = xp.concatenate([labels, labels[near]])

    # slot 0 … G−1: the groups, slot G: the ungrouped elements
    slot = xp.where(labels < 0, n_groups, labels)
    by_slot = xp.argsort(slot, kind="stable")
    counts = to_host(xp.bincount(slot, minlength=n_groups + 1))
    bounds = np.concatenate([[0], np.cumsum(counts)])
    parts = []
    for s in range(n_groups + 1):
        if bounds[s + 1] > bounds[s]:
            take = by_slot[int(bounds[s]):int(bounds[s + 1])]
            parts.append((s if s < n_groups else -1,
                          remesh(x[take], alpha[take], h, origin=origin, threshold=0.0,
                                 overlap=overlap)))
    index, merged, label = _merge(parts, x.dtype, xp)

    if ground_z is not None:
        above = xp.flatnonzero(index[:, 2] >= 0)
        index, merged, label = index[above], merged[above], label[above]
        on_plane = (index[:, 2] == 0)[:, None]
        half = xp.zeros_like(merged)
        half[:, 2] = merged[:, 2] * merged.dtype.type(0.5)
        merged = xp.where(on_plane, half, merged)

    return _finish(index, merged, label, n_groups, h, origin, overlap, threshold, xp)


def _merge(parts, dtype, xp):
    """The union of the groups' nodes, their summed strengths and labels (module
    docstring, steps 2 and 3).

    Parameters
    ----------
    parts : list of (label, Remeshed) in slot order; each Remeshed's nodes distinct
    dtype : the float dtype of the strengths

    Returns
    -------
    index (M, 3) int64, alpha (M, 3), label (M,) int64; sorted by lattice index.
    """
    if not parts:
        return (xp.zeros((0, 3), dtype=xp.int64), xp.zeros((0, 3), dtype=dtype),
                xp.zeros(0, dtype=xp.int64))
    index = xp.concatenate([r.index for _, r in parts])
    if index.shape[0] == 0:
        return index, xp.zeros((0, 3), dtype=dtype), xp.zeros(0, dtype=xp.int64)
    box = to_host(xp.concatenate([xp.min(index, axis=0), xp.max(index, axis=0)]))
    lo, shape = box[:3], box[3:] - box[:3] + 1
    if math.prod(int(e) for e in shape) >= _MAX_KEY:
        raise ValueError(f"the groups span {tuple(int(e) for e in shape)} lattice nodes, "
                         "more than 2^62 node keys; remesh with a larger h.")
    local = index - xp.asarray(lo)
    keys = (local[:, 0] * int(shape[1]) + local[:, 1]) * int(shape[2]) + local[:, 2]
    union, rows = xp.unique(keys, return_inverse=True)
    rows = rows.reshape(-1)
    m = union.shape[0]
    alpha = xp.zeros((m, 3), dtype=dtype)
    best = xp.full(m, -1.0, dtype=dtype)          # below every |α_{n,g}|², so slot 0 wins
    label = xp.full(m, -1, dtype=xp.int64)
    start = 0
    for value, r in parts:
        target = rows[start:start + len(r)]       # distinct nodes within one group
        start += len(r)
        alpha[target] += r.alpha
        share = xp.sum(r.alpha * r.alpha, axis=1)
        wins = share > best[target]               # strict: ties stay with the earlier slot
        best[target] = xp.where(wins, share, best[target])
        label[target] = xp.where(wins, value, label[target])
    return key_index(union, shape, lo, xp), alpha, label


def _finish(index, alpha, label, n_groups, h, origin, overlap, threshold, xp):
    """The threshold (relative to the merged nodes), the slot order, positions, σ and V."""
    n_nodes = int(index.shape[0])
    keep, dropped_alpha, dropped_abs = threshold_nodes(alpha, threshold, xp)
    index, alpha, label = index[keep], alpha[keep], label[keep]
    # groups contiguous in slot order; a stable sort keeps the lattice order within each
    order = xp.argsort(xp.where(label < 0, n_groups, label), kind="stable")
    index, alpha, label = index[order], alpha[order], label[order]
    dtype = alpha.dtype
    x = index.astype(dtype) * dtype.type(h) + xp.asarray(origin, dtype=dtype)
    m = int(index.shape[0])
    return Remeshed(x=x, alpha=alpha, sigma=xp.full(m, overlap * h, dtype=dtype),
                    volume=xp.full(m, h ** 3, dtype=dtype), h=h, n_nodes=n_nodes,
                    n_dropped=n_nodes - m, dropped_alpha=dropped_alpha,
                    dropped_abs=dropped_abs, index=index, group=label)


def _check_shapes(x, alpha):
    """N of x (N, 3) and alpha (N, 3) (dtypes and finiteness: :func:`remesh`)."""
    for name, a in (("x", x), ("alpha", alpha)):
        if getattr(a, "ndim", None) != 2 or a.shape[1] != 3:
            raise ValueError(f"{name} has shape {getattr(a, 'shape', None)}; expected (N, 3).")
    if alpha.shape != x.shape:
        raise ValueError(f"alpha has shape {alpha.shape}; expected {x.shape} to match x. "
                         "Pass vector strengths (vorticity × volume), one per position.")
    if x.dtype.kind != "f":
        raise TypeError(f"x has dtype {x.dtype}; expected float64 or float32.")
    return int(x.shape[0])


def _check_labels(group, n, n_groups, xp):
    """The labels (N,) int64 in the namespace of x and the number of groups G, checked:
    every label in −1 … G − 1 (G default: the largest label + 1)."""
    if n_groups is not None and (isinstance(n_groups, bool) or not isinstance(
            n_groups, (int, np.integer)) or n_groups < 0):
        raise ValueError(f"n_groups must be an integer >= 0, got {n_groups!r}.")
    if group is None:
        return xp.full(n, -1, dtype=xp.int64), int(n_groups or 0)
    if getattr(group, "shape", None) != (n,) or group.dtype.kind not in "iu":
        raise TypeError(f"group must be an integer array of shape ({n},) (one label per "
                        f"element, -1: none), got {getattr(group, 'dtype', type(group))} "
                        f"of shape {getattr(group, 'shape', None)}.")
    labels = xp.asarray(to_host(group) if xp is np else group).astype(xp.int64)
    if not n:
        return labels, int(n_groups or 0)
    lo, hi = (int(v) for v in to_host(xp.stack([xp.min(labels), xp.max(labels)])))
    count = max(hi + 1 if n_groups is None else int(n_groups), 0)
    if lo < -1 or hi >= count:
        raise ValueError(f"group labels span {lo} .. {hi}; expected -1 .. {count - 1} (the "
                         "index of each element's group, -1: none). Pass n_groups = the "
                         "number of groups.")
    return labels, count
