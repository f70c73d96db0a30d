r"""The domains: free space, a ground plane by images, the periodic box.

A :class:`Domain` owns the geometric rules that the fast summation and the right-hand side
need (``physics.md``, "Boundaries"):

* ``sources(x, alpha, sigma)``: the elements followed by their images (device arrays, no
  host transfer), what every summation sums over;
* ``check(x, what)``: host-side validation of a state at construction;
* ``extend_box(lo, hi)``: the box of the images from the elements' box;
* ``root_cube(lo, hi, slack, displacement)``: the FMM root cube of a time step.

The domains:

* ``free``: free space, no images.
* ``ground``: the inviscid, impermeable plane z = z₀.  An element at (x, y, z) with
  strength (α_x, α_y, α_z) has an image at (x, y, 2z₀ − z) with strength
  (−α_x, −α_y, α_z) and the same core σ.  The images are generated inside the
  right-hand side (appended to the sources of each summation) and never stored as
  state; tracers see them like the elements do.  The normal velocity then vanishes on
  the plane, and the motion in z > z₀ is that of the upper half of a mirror-symmetric
  free-space flow (a ring hitting the ground moves exactly as one ring of a head-on
  collision of two mirror rings).

* ``periodic``: the cube [0, L)³ with all its periodic images (:class:`PeriodicBox`):
  the ``sources`` are the elements (the images enter the summation's lattice sum: the
  spectral sum of :mod:`vortexsim.summation.spectral` or the periodic FMM), positions
  anywhere (the sums wrap them, :func:`vortexsim.geometry.periodic.wrap`), Σα = 0
  required; the FMM root cube is the box itself.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._names import did_you_mean
from ..backend import array_namespace, to_host
from .periodic import check_periodic_sources

__all__ = ["Domain", "FreeSpace", "GroundPlane", "PeriodicBox", "make_domain", "BOUNDARIES",
           "mirror"]

BOUNDARIES = ("free", "ground", "periodic")


def mirror(x, alpha, z0=0.0):
    """Images of elements in the plane z = z₀: (x, y, 2z₀ − z), (−α_x, −α_y, α_z).

    Parameters
    ----------
    x, alpha : arrays (N, 3) [L], [L³/T] (NumPy or CuPy)
    z0 : float [L]

    Returns
    -------
    x_image, alpha_image : new arrays (N, 3), same namespace and dtype
    """
    xp = array_namespace(x, alpha)
    sign = xp.asarray([1.0, 1.0, -1.0], dtype=x.dtype)
    x_img = x * sign
    if z0 != 0.0:
        x_img[:, 2] += 2.0 * z0
    return x_img, alpha * (-sign)


class Domain:
    """Base of the domains: the rules shared by the open ones (free space, ground plane).

    Subclasses set ``name`` and implement :meth:`sources`, :meth:`check`,
    :meth:`extend_box` and :meth:`as_dict`; :meth:`root_cube` serves every open domain.
    """

    name = "domain"

    @property
    def n_images_per_element(self):
        """Images the summation adds per element (0: none)."""
        return 0

    def root_cube(self, lo, hi, slack, displacement):
        """FMM root cube of a time step over the box [lo, hi] of the points (images included).

        Parameters
        ----------
        lo, hi : host arrays (3,) [L], the box of sources and targets at the step's start
        slack : float, margin as a fraction of the box width (``root_slack``)
        displacement : float [L], how far a point may move within the step (2 dt max|u|)

        Returns
        -------
        corner : host array (3,) [L], the cube's lower corner
        edge : float [L]
        margin : float [L], added on every side: max(slack × width, displacement), so that
            the points stay inside the cube over all the stages of the step.
        """
        width = float((hi - lo).max())
        margin = max(slack * max(width, 1e-300), displacement)
        return lo - margin, width + 2 * margin, margin


@dataclasses.dataclass(frozen=True)
class FreeSpace(Domain):
    """Unbounded domain: the sources are the elements themselves."""

    name: str = "free"

    def sources(self, x, alpha, sigma):
        return x, alpha, sigma

    def check(self, x, what):
        return None

    def extend_box(self, lo, hi):
        """(lo, hi) of sources ∪ targets given the elements' box: unchanged."""
        return lo, hi

    def as_dict(self):
        return {"boundary": "free"}


@dataclasses.dataclass(frozen=True)
class GroundPlane(Domain):
    """The plane z = z₀ (elements and tracers in z ≥ z₀), by images.

    Parameters
    ----------
    z0 : float [L], height of the plane
    """

    z0: float = 0.0
    name: str = "ground"

    def __post_init__(self):
        if not math.isfinite(self.z0):
            raise ValueError(f"ground height z0 must be finite, got {self.z0!r}.")

    @property
    def n_images_per_element(self):
        return 1

    def sources(self, x, alpha, sigma):
        """Elements followed by their images: (2N, 3), (2N, 3), (2N,)."""
        xp = array_namespace(x, alpha, sigma)
        x_img, alpha_img = mirror(x, alpha, self.z0)
        return (xp.concatenate([x, x_img]), xp.concatenate([alpha, alpha_img]),
                xp.concatenate([sigma, sigma]))

    def check(self, x, what):
        """Raise if any point of ``x`` (host or device) lies below the plane."""
        z = to_host(x[:, 2]) if len(x) else np.zeros(0)
        if z.size and float(z.min()) < self.z0:
            raise ValueError(
                f"{what} reach below the ground plane z0 = {self.z0} (min z = {float(z.min()):g}); "
                "with boundary='ground' every element and tracer must start at z >= z0. "
                "Move the case up or lower z0.")

    def extend_box(self, lo, hi):
        """Box of the elements and their images from the elements' box (host (3,) arrays)."""
        lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
        z_lo, z_hi = lo[2], hi[2]
        lo[2] = min(z_lo, 2 * self.z0 - z_hi)
        hi[2] = max(z_hi, 2 * self.z0 - z_lo)
        return lo, hi

    def as_dict(self):
        return {"boundary": "ground", "ground_z": self.z0}


@dataclasses.dataclass(frozen=True)
class PeriodicBox(Domain):
    """The periodic box [0, L)³: every element has images at all shifts L ℤ³.

    Parameters
    ----------
    box : float [L], the edge L
    """

    box: float = 2.0 * math.pi
    name: str = "periodic"

    def __post_init__(self):
        if not (math.isfinite(self.box) and self.box > 0):
            raise ValueError(f"the periodic box needs an edge box = L > 0, got {self.box!r}.")

    def sources(self, x, alpha, sigma):
        """The elements: their images enter the summation's lattice sum."""
        return x, alpha, sigma

    def check(self, x, what):
        """Every position is accepted (the sums wrap them into the box)."""
        return None

    def check_strengths(self, alpha, communicator=None):
        """Raise unless Σα vanishes (:func:`vortexsim.geometry.periodic.check_periodic_sources`;
        ``communicator``: over every rank's part)."""
        check_periodic_sources(alpha, communicator=communicator)

    def extend_box(self, lo, hi):
        """The box itself."""
        return np.zeros(3), np.full(3, self.box)

    def root_cube(self, lo, hi, slack, displacement):
        """The box itself, no margin (positions are wrapped into it)."""
        return np.zeros(3), self.box, 0.0

    def as_dict(self):
        return {"boundary": "periodic", "box": self.box}


def make_domain(name="free", ground_z=0.0, box=None):
    """The domain of a boundary name (``"free"`` | ``"ground"`` | ``"periodic"``), the
    plane height [L] and the periodic box's edge [L]."""
    if name == "free":
        return FreeSpace()
    if name == "ground":
        return GroundPlane(float(ground_z))
    if name == "periodic":
        if box is None:
            raise ValueError("boundary='periodic' needs the box edge: box = L (the cube "
                             "[0, L)^3).")
        return PeriodicBox(float(box))
    raise ValueError(f"Unknown boundary {name!r}; expected one of {list(BOUNDARIES)}."
                     f"{did_you_mean(name, BOUNDARIES)}")
