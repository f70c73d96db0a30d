"""Remeshing as an updater: it acts on the model between two steps.

Every ``remesh_every`` steps the elements are interpolated onto the lattice of spacing
``remesh_spacing`` with M4′ and the model's particle set is replaced
(:meth:`VortexModel.replace_elements`; ``docs/remeshing.md``):

* periodic box: all (L/h)³ nodes, the strengths by the mesh solve's P2M
  (:mod:`vortexsim.geometry.m4_cpu` or ``m4_gpu``: the weights of
  :func:`vortexsim.geometry.remesh.remesh`), the groups dropped, optionally projected
  (``remesh_project``);
* free space and the ground plane: every element (above a plane, with its image) onto
  one lattice, each node labelled with the group that contributes most to it, the groups
  contiguous (:func:`vortexsim.physics.remesh_groups.remesh_groups`); above a plane the
  nodes z ≥ z₀ are kept, those on it at half strength.

The schedule is the iteration count, so a restart keeps it, and whether the elements sit
on the periodic lattice in remesh order is a function of (iteration, parameters) alone.
"""
from __future__ import annotations

import math

import numpy as np

from ..geometry import GroundPlane, PeriodicBox, periodic_nodes
from ..geometry.remesh import remesh
from ..physics.remesh_groups import remesh_groups

__all__ = ["Remeshing"]


class Remeshing:
    """The remeshing of a model: its parameters (``remesh_every``, ``remesh_spacing``,
    ``remesh_overlap``, ``remesh_threshold``, ``remesh_project`` of the run parameters),
    checked once at construction against the model's domain and viscous term.  Any
    number of groups may be remeshed, in free space, above a ground plane or in the box:
    outside the box they share one lattice (no two nodes coincide)."""

    def __init__(self, cfg, domain, rhs, groups):
        self.parameters, self.domain = cfg, domain
        self.check(cfg, domain, rhs, groups)

    @property
    def every(self):
        """Steps between two remeshings (0: never)."""
        return self.parameters["remesh_every"]

    @staticmethod
    def check(cfg, domain, rhs, groups):
        """Validate the remeshing parameters (``remesh_*``) once, at construction."""
        every = cfg["remesh_every"]
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 0:
            raise ValueError(f"remesh_every must be an integer >= 0 (steps between two "
                             f"remeshings; 0: never), got {every!r}.")
        project = cfg["remesh_project"]
        if not isinstance(project, (bool, np.bool_)):
            raise ValueError(f"remesh_project must be true or false, got {project!r}.")
        if project and not (every and isinstance(domain, PeriodicBox)):
            raise ValueError("remesh_project = true projects the periodic lattice's strengths "
                             "after each remeshing: it needs boundary = 'periodic' and "
                             f"remesh_every > 0 (got boundary = {domain.name!r}, "
                             f"remesh_every = {every}).")
        if rhs.nu > 0 and rhs.viscous == "lattice" and every != 1:
            raise ValueError("viscous='lattice' diffuses the remeshing lattice around every "
                             f"step: it needs remesh_every = 1 (got {every}).")
        if not every:
            return
        h = cfg["remesh_spacing"]
        if h is None or not (isinstance(h, (int, float)) and math.isfinite(h) and h > 0):
            raise ValueError(f"remesh_every = {every} needs the lattice spacing "
                             f"remesh_spacing = h > 0 [L], got {h!r}.")
        if rhs.nu > 0 and rhs.viscous == "core_spreading":
            raise ValueError("remeshing resets every core to remesh_overlap × h, which undoes "
                             "core spreading: with nu > 0 remesh with viscous='pse', or set "
                             "remesh_every = 0.")
        if isinstance(domain, PeriodicBox):
            periodic_nodes(domain.box, float(h))   # L/h an integer >= 4, or a clear error
        # the core every remeshing sets: the spectral sum's series, PSE's reach
        for part in (rhs.summation, *rhs.terms):
            if hasattr(part, "check_core"):
                try:
                    part.check_core(float(cfg["remesh_overlap"]) * float(h))
                except ValueError as exc:
                    raise ValueError(f"after each remeshing sigma = remesh_overlap x h = "
                                     f"{cfg['remesh_overlap']} x {float(h):.6g}: "
                                     f"{exc}") from None

    def _lattice(self, model, h, overlap):
        """The periodic lattice's elements (x, σ, V of all n³ nodes, in remesh order, in
        the model's dtype and device), made once: every remeshing of the box puts the
        elements on the same nodes."""
        el = model.elements
        key = (float(h), float(overlap), el.x.dtype, model.device.kind)
        if getattr(self, "_nodes", None) is None or self._nodes[0] != key:
            empty = model.device.xp.zeros((0, 3), dtype=el.x.dtype)
            self._nodes = (key, remesh(empty, empty, h, box_length=self.domain.box,
                                       overlap=overlap))
        return self._nodes[1]

    def due(self, iteration):
        """Whether the step that ended at ``iteration`` ends with a remeshing."""
        every = self.every
        return bool(every) and iteration % every == 0

    def lattice_nodes(self):
        """n of the periodic n³ remeshing lattice (periodic box, remeshing on), else None."""
        if not (self.every and isinstance(self.domain, PeriodicBox)):
            return None
        return periodic_nodes(self.domain.box, float(self.parameters["remesh_spacing"]))

    def remeshed_lattice(self, iteration):
        """n when the elements sit on the periodic n³ lattice in remesh order because the
        step that ended at ``iteration`` ended with a remeshing; else None."""
        if not (iteration > 0 and self.due(iteration)):
            return None
        return self.lattice_nodes()

    def apply(self, model):
        """Remesh the elements of ``model`` (see :meth:`VortexModel.remesh`)."""
        cfg, el = self.parameters, model.elements
        if cfg.get("remesh_spacing") is None:
            raise ValueError("remesh() needs the lattice spacing: build the simulation with "
                             "remesh_spacing = h [L].")
        h, overlap = float(cfg["remesh_spacing"]), float(cfg["remesh_overlap"])
        if isinstance(self.domain, PeriodicBox) and model.partition is not None:
            # this rank's slab nodes (the state split by slabs over the ranks)
            alpha = model.partition.remesh(model, bool(cfg["remesh_project"]))
            return model.onto_lattice(model.partition.own_nodes(el.x.dtype, overlap),
                                      alpha)
        if isinstance(self.domain, PeriodicBox):
            box, n = self.domain.box, periodic_nodes(self.domain.box, h)
            # the mesh solve's P2M (without remesh's checks and canonical order: the
            # same weights, the sums in the elements' order; on the CPU the sparse M4′
            # product took 20 ms a step at 24³ where remesh took 28)
            if model.device.xp is np:
                from ..geometry.m4_cpu import periodic_p2m  # noqa: PLC0415
            else:
                from ..geometry.m4_gpu import periodic_p2m  # noqa: PLC0415
            alpha = periodic_p2m(el.x, el.alpha, n, box / n).astype(el.x.dtype, copy=False)
            if cfg["remesh_project"]:
                from ..physics.projection import project_solenoidal  # noqa: PLC0415
                alpha = project_solenoidal(alpha, n)
            return model.onto_lattice(self._lattice(model, h, overlap), alpha)
        # free space or the ground plane: one lattice, every node labelled
        ground = self.domain.z0 if isinstance(self.domain, GroundPlane) else None
        out = remesh_groups(el.x, el.alpha, el.group, h, n_groups=len(model.groups),
                            ground_z=ground, threshold=float(cfg["remesh_threshold"]),
                            overlap=overlap)
        return model.replace_elements(out.x, out.alpha, out.sigma, volume=out.volume,
                                      group=out.group)
