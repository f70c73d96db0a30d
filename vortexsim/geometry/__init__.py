"""Where the elements live: free space, the ground plane (by images), the periodic box.

Between the kernels and the FMM: the summations, the FMM's periodic version, PSE and
remeshing import their geometric rules from here.

* :mod:`.boundaries`: the domains (:class:`FreeSpace`, :class:`GroundPlane` with
  :func:`mirror`, :class:`PeriodicBox`), :func:`make_domain` and :data:`BOUNDARIES`:
  sources with images, checks, the box of the images, the FMM root cube;
* :mod:`.remesh`: the M4′ interpolation of strengths onto a lattice (free space or the
  periodic box, deterministic): the remeshing's and the particle-mesh solve's;
* :mod:`.periodic`: the periodic box's :func:`wrap`, its net-vorticity condition
  (:func:`check_periodic_sources`) and its lattice (:func:`periodic_nodes`).
"""
from .boundaries import (BOUNDARIES, Domain, FreeSpace, GroundPlane, PeriodicBox,
                         make_domain, mirror)
from .periodic import (MIN_PERIODIC_NODES, NET_VORTICITY_TOL, check_periodic_sources,
                       periodic_nodes, wrap)

__all__ = ["BOUNDARIES", "Domain", "FreeSpace", "GroundPlane", "PeriodicBox", "make_domain",
           "mirror", "MIN_PERIODIC_NODES", "NET_VORTICITY_TOL", "check_periodic_sources",
           "periodic_nodes", "wrap"]
