r"""The periodic box's state split by x-slabs over the ranks of a run: each rank holds and
steps only the elements of its own slab of the remeshing lattice.

A periodic run with the particle-mesh solve (``method = "mesh"``), remeshing every step
and no tracers keeps its elements on the n³ lattice nodes in remesh order (node (i, j, k)
in row (i n + j) n + k).  On P ranks, rank r holds the rows [i0 n², i1 n²) of its
x-planes [i0, i1) (:class:`vortexsim.geometry.slab.Slabs`, the split of the mesh
solve), and one step is, on every rank together:

* the half step of lattice diffusion on the slab (:func:`.physics.slab_lattice.diffuse_slab`
  and the whole lattice's mean taken out: :func:`.physics.slab_lattice.slab_column_mean`);
* each stage's u and ∇u at the rank's elements (:class:`OwnSlabSum`): on the lattice the
  slab solve alone (:meth:`.summation.slab_mesh.SlabMeshSolve.on_nodes`), elsewhere its
  P2M and M2P with the elements that moved into a neighbour's slab lent to it for the
  stage (:func:`.summation.slab_lend.evaluate_lent`: they move less than a cell);
  classical stretching takes the whole lattice's mean rate out (one ``allreduce_sum``);
* the step's check on the maxima and boxes of all ranks (:meth:`SlabPartition.combine`:
  one host allgather of 9 numbers);
* the remeshing onto the slab (:func:`.summation.slab_lend.remesh_lent`: the lent
  elements' P2M by their owners, the ghost planes added in rank order) and its projection
  (:func:`.physics.slab_lattice.project_solenoidal_slab`); the rank's elements are again
  its slab's nodes;
* the second half step of diffusion.

No element's u, ∇u or strength leaves its rank in a step but the few lent ones, the ghost
planes and the slab transforms' alltoalls.  Against one rank the run agrees to round-off
(the same operations associated differently).

The whole state exists only where something needs it: :meth:`SlabPartition.assemble`
gathers the strengths (the nodes' positions, cores and volumes are known) into the whole
(n³) lattice in remesh order on every rank, for the diagnostics rows, snapshots, plots
and :meth:`VortexModel.state_dict` (the simulation calls it, collectively, before any
output acts); the next step drops it again.  A case whose run will be split
(:func:`splits_by_slabs`) builds only each rank's rows (``builder.slab``, called by
:func:`vortexsim.cases.make_case`), which the model takes as its own
(:meth:`SlabPartition.adopt`), and so does a restart (rank 0 reads the snapshot and
sends each rank its rows: :func:`vortexsim.cli.restart.snapshot_on_ranks`;
:meth:`VortexModel.load_state_dict` of a state with ``rows``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging

import numpy as np

from ..backend import to_host
from ..backend.spill import frozen, should_spill, spill_array
from ..geometry.periodic import are_lattice_nodes, lattice_node_positions
from ..physics.slab_lattice import project_solenoidal_slab
from ..physics.terms import LatticeDiffusion, Stretching
from ..state import Elements
from ..summation.slab_lend import evaluate_lent, remesh_lent

logger = logging.getLogger(__name__)

__all__ = ["SlabPartition", "SlabSplit", "OwnSlabSum", "partition_reason", "splits_by_slabs",
           "ROOT_CHUNK_ROWS"]

#: rows of strengths (24 B each) a rank sends to rank 0 in one message of
#: :meth:`SlabPartition.assemble_on_root` (192 MiB: far below MPI's 2 GiB counts)
ROOT_CHUNK_ROWS = 1 << 23


def splits_by_slabs(config, ranks):
    """Whether a run of ``config`` (its case and run parameters, method as given) on
    ``ranks`` ranks will hold its state split by slabs, told from the config alone (no
    model built): the periodic box, ``method = "mesh"``, ``remesh_every = 1`` onto the
    n³ nodes (``remesh_spacing`` box/n or not given), no tracers, ``viscous =
    "lattice"`` or ν = 0, at least 2 x-planes a rank.  Never True where
    :func:`partition_reason` of the model would not be None; a case may then build only
    each rank's rows of its state (:func:`vortexsim.cases.make_case`)."""
    n, nu, box = config.get("n"), config.get("nu", 0.0), config.get("box")
    spacing = config.get("remesh_spacing")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        return False
    on_lattice = spacing is None or (
        n > 0 and isinstance(box, (int, float)) and isinstance(spacing, (int, float))
        and abs(spacing - box / n) <= 1e-9 * box / n)
    return bool(ranks > 1 and config.get("boundary") == "periodic"
                and config.get("method") == "mesh" and config.get("remesh_every") == 1
                and not config.get("tracers") and n >= 2 * ranks and on_lattice
                and (config.get("viscous", "lattice") == "lattice"
                     or (isinstance(nu, (int, float)) and nu == 0)))


def partition_reason(model, own_slab=False):
    """None when ``model``'s state can be split by slabs (module docstring), else why
    not (a sentence; "" for one rank, where there is nothing to split).  ``own_slab``:
    its elements are one rank's slab (:meth:`SlabPartition.adopt` checks them); a model
    split already passes the check of its nodes too."""
    comm = model.communicator
    if int(comm.size) == 1:
        return ""
    if getattr(model.summation, "name", None) != "mesh" or not hasattr(model.summation,
                                                                       "slab_solve"):
        return "the summation is not the particle-mesh solve (method = 'mesh')"
    if model.remeshing.every != 1 or model.remeshing.lattice_nodes() is None:
        return "the run does not remesh onto the periodic lattice every step"
    if len(model.tracers):
        return "the run has tracers"
    kinds = {type(t) for t in model.rhs.terms}
    if not kinds <= {Stretching, LatticeDiffusion}:
        return "its viscous term is not viscous = 'lattice' (or none)"
    n = model.remeshing.lattice_nodes()
    if own_slab or model.partition is not None:     # each rank's rows checked already
        return None
    if len(model.elements) != n ** 3 or not are_lattice_nodes(model.elements.x, n,
                                                              model.domain.box):
        return f"its elements are not the {n}^3 lattice nodes in remesh order"
    return None



class SlabSplit:
    """The part of :class:`vortexsim.model.VortexModel` that deals with its state split by
    slabs (a base class of the model: these methods use its ``partition``, ``elements``
    and ``summation``; ``partition`` None where every rank holds the whole state)."""

    partition = None

    def _init_partition(self, own_slab=False):
        """Split the state by x-slabs over the ranks where it can be
        (module docstring); else every rank keeps the whole state.  ``own_slab``:
        the elements are this rank's slab already (ValueError where the run cannot
        split)."""
        reason = partition_reason(self, own_slab)
        if reason is None:
            self.partition = SlabPartition(self)
            if own_slab:
                self.partition.adopt(self)
            else:
                self.partition.split(self)
        elif own_slab:
            raise ValueError("the elements given are one rank's slab of a lattice state, "
                             "but this run cannot hold its state split by slabs: "
                             f"{reason or 'it runs on one rank'}.")
        elif reason and self.summation.method == "mesh":
            logger.info("every rank holds the whole state: %s (the split by slabs needs "
                        "method = 'mesh', remesh_every = 1, no tracers and viscous = "
                        "'lattice' or none).", reason)

    def assemble(self):
        """Hold the whole state in :attr:`elements` where the ranks hold it split by slabs
        (:meth:`SlabPartition.hold_all`; nothing to do otherwise), until
        the next step.  Collective: every rank calls it together."""
        if self.partition is not None:
            self.partition.hold_all(self)

    def assemble_on_root(self, spill_dir=None):
        """:meth:`assemble` on rank 0's host alone (NumPy arrays in :attr:`elements`
        there, memory maps of files in ``spill_dir`` where given), for what rank 0 alone
        writes (:meth:`SlabPartition.hold_on_root`)."""
        if self.partition is not None:
            self.partition.hold_on_root(self, spill_dir)

    @property
    def assembled(self):
        """Whether :attr:`elements` holds the whole state (always, on one rank)."""
        return self.partition is None or self.partition.whole is not None

    @property
    def own_elements(self):
        """This rank's elements: its slab's where the state is split, else all."""
        return self.elements if self.partition is None else self.partition.own

    def _drop_whole(self):
        """Back to this rank's own elements, where the whole state is held."""
        if self.partition is not None:
            self.partition.drop(self)


class OwnSlabSum:
    """The stage summation of a rank holding its slab's elements: u (N_r, 3) and ∇u at
    its own elements of the blobs of all ranks, the self pairs out, in the summation's
    precision; the call and :meth:`on_lattice` of :class:`vortexsim.summation.Summation`
    as :class:`vortexsim.physics.rhs.VortexRHS` makes them (the elements their own
    targets, no images, no tracers).  Collective."""

    def __init__(self, partition):
        self.partition = partition
        self.shares = partition.shares
        self.device = self.shares.device

    def __call__(self, x, alpha, sigma, targets, *, n_self=0, gradient=True,
                 sigma_range=None, plan=None):
        if targets is not x:
            raise ValueError("a rank holding its slab's elements evaluates at them alone "
                             "(no tracers).")
        solve = self.shares.slab_solve(sigma, sigma_range)
        u, grad = evaluate_lent(solve, x, alpha, gradient=bool(gradient))
        dtype = np.dtype(self.shares.precision)
        u = u.astype(dtype, copy=False)
        if grad is None:
            return u, None
        grad = grad.astype(dtype, copy=False)
        if n_self:
            self.shares.inner.remove_self_pairs(grad, alpha, sigma, 0, n_self,
                                                reuse=plan is not None)
        return u, grad

    def on_lattice(self, alpha, n, sigma_range):
        """u and ∇u at this rank's slab nodes, of strengths ``alpha`` (n_x n², 3) in
        remesh order (:meth:`.summation.slab_shares.SlabShares.on_slab_nodes`)."""
        if int(n) != self.partition.n:
            raise ValueError(f"the elements sit on a {n}^3 lattice but the split's is "
                             f"{self.partition.n}^3.")
        u, grad = self.shares.on_slab_nodes(alpha, sigma_range)
        dtype = np.dtype(self.shares.precision)
        return u.astype(dtype, copy=False), grad.astype(dtype, copy=False)


class SlabPartition:
    """The split of ``model``'s state by slabs (module docstring); made by
    :class:`vortexsim.model.VortexModel` when :func:`partition_reason` is None.

    Attributes
    ----------
    n : lattice nodes per side; rows : (r0, r1), this rank's rows of the whole lattice;
    counts : the rows of every rank; stage_sum : :class:`OwnSlabSum`
    """

    def __init__(self, model):
        self.communicator = model.communicator
        self.shares = model.summation
        self.n = int(model.remeshing.lattice_nodes())
        self.box = float(model.domain.box)
        self.solve = self.shares.slab_solve(None, model.sigma_range)
        self._nodes_on_root = None      # ((σ, dtype, spilled), rank 0's node arrays)
        plane = self.n * self.n
        self.rows = tuple(int(i) * plane for i in self.solve.x_planes)
        self.counts = self.solve.slabs.counts(plane)
        self.stage_sum = OwnSlabSum(self)
        self._nodes = None
        #: this rank's elements; the whole state held (or None) and where: "all" ranks,
        #: "root" (rank 0's host), or None
        self.own, self.whole, self.whole_on = None, None, None

    # -- the model's elements: its own and the whole ------------------------------------
    def split(self, model):
        """Keep this rank's rows of ``model``'s whole elements (which stay held as the
        assembled state until the next step)."""
        self.check_whole(model.elements.x)
        self.whole, self.whole_on = model.elements, "all"
        self.own = self.own_rows(self.whole)

    def adopt(self, model):
        """Take ``model``'s elements as this rank's own: they must be its slab's nodes in
        remesh order (a state built by slabs); the whole state is not held."""
        x, (r0, r1) = model.elements.x, self.rows
        bad = x.shape[0] != r1 - r0 or not are_lattice_nodes(x, self.n, self.box, row0=r0)
        if self.communicator.any(bad):                 # on every rank together
            raise ValueError("a rank's elements are not the nodes of its slab (on rank "
                             f"{int(self.communicator.rank)}: rows {r0}..{r1} of the "
                             f"{self.n}^3 lattice in remesh order) that a state built by "
                             "slabs must hold.")
        self.own, self.whole, self.whole_on = model.elements, None, None

    def assembles(self, root):
        """Whether :meth:`hold_on_root` (``root``) or :meth:`hold_all` would assemble the
        whole state now (it is not held where they need it yet)."""
        return self.whole_on is None if root else self.whole_on != "all"

    def hold_all(self, model):
        """``model.elements`` the whole state on every rank (:meth:`assemble`), until
        :meth:`drop`.  Collective."""
        if self.assembles(root=False):
            self.whole, self.whole_on = self.assemble(self.own), "all"
            model.elements = self.whole

    def hold_on_root(self, model, spill_dir=None):
        """``model.elements`` the whole state on rank 0's host alone
        (:meth:`assemble_on_root`, in files of ``spill_dir`` where given); the other
        ranks keep their slabs.  Collective; nothing to do where the whole state is held
        already."""
        if self.assembles(root=True):
            self.whole, self.whole_on = self.assemble_on_root(self.own, spill_dir), "root"
            if self.whole is not None:
                model.elements = self.whole

    def drop(self, model):
        """``model.elements`` this rank's own again (the start of a step)."""
        if self.whole_on is not None:
            self.whole = self.whole_on = None
            model.elements = self.own

    def keep(self, model):
        """After a step: ``model.elements`` are this rank's own (a failed step that
        assembled the state keeps the own elements it started from)."""
        if self.whole is None:
            self.own = model.elements

    @contextlib.contextmanager
    def own_stages(self, rhs):
        """Within it, ``rhs`` (:class:`vortexsim.physics.rhs.VortexRHS`) acts on this rank's
        elements alone: its summation is :attr:`stage_sum`, classical stretching takes
        the whole lattice's mean rate out, lattice diffusion runs on the slab.  Outside
        it (an evaluation of the assembled whole state) they are one rank's again."""
        summation, rhs.summation = rhs.summation, self.stage_sum
        for term in rhs.terms:
            if isinstance(term, LatticeDiffusion):
                term.bind_slab(self.solve.fft, self.rows[0])
            elif isinstance(term, Stretching):
                term.bind_ranks(self.communicator, self.n ** 3)
        try:
            yield
        finally:
            rhs.summation = summation
            for term in rhs.terms:
                if isinstance(term, LatticeDiffusion):
                    term.bind_slab(None, 0)
                elif isinstance(term, Stretching):
                    term.bind_ranks(None, 0)

    # -- the rank's part and the whole ----------------------------------------------
    def own_rows(self, elements):
        """This rank's rows of the whole ``elements`` (n³ nodes in remesh order)."""
        r0, r1 = self.rows
        cut = (lambda a: None if a is None else a[r0:r1].copy())
        return Elements(*(cut(getattr(elements, f.name))
                          for f in dataclasses.fields(elements)))

    def check_whole(self, x, what="the state"):
        """ValueError unless the positions ``x`` (host or device) are the n³ lattice nodes
        in remesh order."""
        n = self.n
        if x.shape[0] != n ** 3 or not are_lattice_nodes(x, n, self.box):
            raise ValueError(f"{what} does not hold the {n}^3 lattice nodes in remesh "
                             "order that a periodic run split over ranks needs (the "
                             "periodic cases' elements, remeshed every step).")

    def own_nodes(self, dtype, overlap):
        """x (rows, 3), σ = ``overlap`` h and V = h³ of this rank's slab nodes in remesh
        order (as :func:`vortexsim.geometry.remesh.remesh` makes the whole lattice's), of
        ``dtype`` on the device, made once: the remeshing's target."""
        key = (np.dtype(dtype), float(overlap))
        if self._nodes is None or self._nodes[0] != key:
            xp, dtype = self.shares.device.xp, np.dtype(dtype)
            h = self.box / self.n
            x = lattice_node_positions(*self.rows, self.n, h, dtype, xp)
            m = x.shape[0]
            self._nodes = (key, _Nodes(x=x, sigma=xp.full(m, overlap * h, dtype=dtype),
                                       volume=xp.full(m, h ** 3, dtype=dtype)))
        return self._nodes[1]

    def assemble(self, own):
        """The whole state (n³ nodes in remesh order) from every rank's ``own`` slab
        elements: the strengths gathered in rank order, the nodes' x, σ, V made here.
        Collective; the same bits on every rank."""
        xp, dtype = self.shares.device.xp, own.x.dtype
        alpha = self.shares._gather(own.alpha, self.counts)
        n, h = self.n, self.box / self.n
        x = lattice_node_positions(0, n ** 3, n, h, dtype, xp)
        # one σ on the lattice (every rank holds at least 2 planes of it)
        sigma = xp.broadcast_to(own.sigma[:1], (n ** 3,)).copy()
        volume = xp.full(n ** 3, h ** 3, dtype=dtype)
        group = xp.full(n ** 3, -1, dtype=xp.int64)
        return Elements(x=x, alpha=alpha, sigma=sigma, volume=volume, group=group)

    def assemble_on_root(self, own, spill_dir=None):
        """The whole state on rank 0's host (NumPy arrays; None on the other ranks), for
        the output that rank 0 alone writes (snapshots, the plot): each rank's strengths
        copied to its host and sent to rank 0 in messages of at most
        :data:`ROOT_CHUNK_ROWS` rows (:meth:`~vortexsim.backend.communicator.Communicator
        .gather_rows_on_root`: over MPI into their rows of the whole), the nodes' x, σ, V
        made there once and kept (they stay the same while σ does).  No GPU holds more
        than its slab.  The arrays are :func:`~vortexsim.backend.spill.frozen`: a
        ``state_dict()`` hands them on without a copy (the next step drops them).

        ``spill_dir`` (a directory, e.g. the run's): where the whole state (72 B a node)
        exceeds a quarter of the memory available (:func:`~vortexsim.backend.spill
        .should_spill`), rank 0 writes each message, and the nodes' x, σ, V and labels
        a block of rows at a time, into memory maps of unlinked files there
        (:mod:`vortexsim.backend.spill`), so that its memory holds one message at a
        time and the snapshot's writer reads the state from the files.  Otherwise in
        memory (also where the files cannot be made: a full disk).

        Rank 0 makes every array before the gather, so that a failure of its own (no
        memory) cannot leave the other ranks waiting in it: it still takes part (its
        messages dropped) and raises after.  Collective."""
        comm, rank = self.communicator, int(self.communicator.rank)
        n, dtype = self.n, np.dtype(own.x.dtype)
        alpha = np.ascontiguousarray(to_host(own.alpha), dtype=dtype)   # as rank 0 holds it
        whole = nodes = error = None
        if rank == 0:
            spill = spill_dir if spill_dir is not None and should_spill(72 * n ** 3) else None
            try:
                try:
                    whole, nodes = self._root_arrays(own, dtype, spill)
                except OSError as exc:          # the files (a full disk): in memory
                    if spill is None:
                        raise
                    logger.warning("the whole state for the snapshot stays in memory: its "
                                   "files in %s cannot be made (%s)", spill, exc)
                    whole, nodes = self._root_arrays(own, dtype, None)
            except (OSError, MemoryError) as exc:
                whole, error = None, exc
        comm.gather_rows_on_root(alpha, self.counts, whole, ROOT_CHUNK_ROWS)
        if error is not None:
            raise error
        return None if rank != 0 else Elements(alpha=frozen(whole), **nodes)

    def _root_arrays(self, own, dtype, spill_dir):
        """Rank 0's array (n³, 3) for the gathered strengths and its node arrays
        (:meth:`_root_nodes`), in files of ``spill_dir`` or (None) in memory."""
        whole = _host_array((self.n ** 3, 3), dtype, spill_dir)
        return whole, self._root_nodes(own, dtype, spill_dir)

    def _root_nodes(self, own, dtype, spill_dir):
        """Rank 0's frozen host x, σ, V and labels of every node (:meth:`assemble_on_root`),
        made a block of rows at a time the first time and kept while σ and the dtype
        stay the same."""
        sigma0 = to_host(own.sigma[:1])[0]
        key = (float(sigma0), dtype.str, spill_dir is not None)
        if self._nodes_on_root is not None and self._nodes_on_root[0] == key:
            return self._nodes_on_root[1]
        self._nodes_on_root = None                     # the old ones freed first
        n, h, rows = self.n, self.box / self.n, self.n ** 3
        fields = {name: _host_array(shape, dt, spill_dir)
                  for name, shape, dt in (("x", (rows, 3), dtype), ("sigma", rows, dtype),
                                          ("volume", rows, dtype),
                                          ("group", rows, np.int64))}
        for r0 in range(0, rows, ROOT_CHUNK_ROWS):
            r1 = min(rows, r0 + ROOT_CHUNK_ROWS)
            fields["x"][r0:r1] = lattice_node_positions(r0, r1, n, h, dtype, np)
            fields["sigma"][r0:r1] = sigma0
            fields["volume"][r0:r1] = h ** 3
            fields["group"][r0:r1] = -1
        fields = {k: frozen(v) for k, v in fields.items()}
        self._nodes_on_root = (key, fields)
        return fields

    # -- the step -----------------------------------------------------------------------
    def combine(self, stats):
        """The step's host stats [finite, max|u|², max‖∇u‖², lo (3), hi (3)] of every
        rank combined: all finite, the largest maxima, the box of all (one allgather).
        A rank without elements contributes its finite flag and maxima alone."""
        parts = self.communicator.allgather(np.asarray(stats, dtype=np.float64))
        out = np.array(max(parts, key=len), dtype=np.float64)
        out[0] = min(p[0] for p in parts)
        with np.errstate(invalid="ignore"):
            out[1:3] = np.max([p[1:3] for p in parts], axis=0)
            if len(out) >= 9:
                boxes = [p for p in parts if len(p) >= 9]
                out[3:6] = np.min([p[3:6] for p in boxes], axis=0)
                out[6:9] = np.max([p[6:9] for p in boxes], axis=0)
        return out

    def remesh(self, model, project):
        """This rank's slab strengths after remeshing ``model``'s own elements (the lent
        ones remeshed by their owners), projected when ``project``: (rows, 3)."""
        el = model.elements
        alpha = remesh_lent(self.solve, el.x, el.alpha)
        if project:
            alpha = project_solenoidal_slab(alpha, self.solve.fft)
        return alpha


def _host_array(shape, dtype, spill_dir):
    """An empty host array: a :func:`~vortexsim.backend.spill.spill_array` in
    ``spill_dir``, or (None) in memory."""
    return (spill_array(shape, dtype, spill_dir) if spill_dir is not None
            else np.empty(shape, dtype))


@dataclasses.dataclass
class _Nodes:
    """This rank's slab nodes: the ``x``, ``sigma`` and ``volume`` of a remeshing."""
    x: object
    sigma: object
    volume: object

    def __len__(self):
        return int(self.x.shape[0])

