"""Splat points (tracers, optionally vortex elements) into an RGB image, like the
pictures of the GPU vortex-ring papers: every point spreads over a small Gaussian
footprint whose radius follows the points' spacing in the image; the splatted density
sets the opacity ``1 - exp(-density / k)``, k from a quantile of the density, and, on a
logarithmic scale, the colour (a matplotlib colour map); the image is composited over a
background.  A thousand tracers and a million both give a well-exposed picture.
:func:`annotate_image` adds a time stamp, a scale bar and colour bars.

One code path for NumPy and CuPy (the array module ``xp`` of the points, or given):
projection, ``bincount``, blur, shading, all on the device (a few scalars to the host);
only the finished uint8 image comes back to the host.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import re
import typing

import numpy as np

from ..backend import array_namespace, to_host
from ..output.files import atomic_path
from .annotate import EXTRA, annotate_image, colorbar, require_matplotlib, scale_bar_length

logger = logging.getLogger(__name__)

__all__ = ["Camera", "Exposure", "Frame", "render_points", "render_snapshot", "read_points",
           "read_frame", "annotate_image", "scale_bar_length", "write_png"]

#: lower end of the colour map used for the sparsest pixels (0 is black in inferno,
#: invisible on a black background)
LUT_LOW = 0.15


@dataclasses.dataclass(frozen=True)
class Camera:
    """An orthographic (or perspective) camera.

    azimuth, elevation : degrees; the camera looks at ``centre`` from the direction
        (cos e cos a, cos e sin a, sin e).  The default (-90, 15) looks along +y, slightly
        from above: x to the right, z (the rings' axis) up.
    centre : (3,) [L] the point at the image centre; None: the centre of the points'
        bounding box.
    extent : [L] the length that the image's shorter side spans; None: the points'
        projected bounding box, 5 % padded, fits the image.
    perspective : distance [L] of the eye from ``centre`` for a perspective view (points
        behind the eye are dropped); None: orthographic.
    """

    azimuth: float = -90.0
    elevation: float = 15.0
    centre: tuple | None = None
    extent: float | None = None
    perspective: float | None = None

    def __post_init__(self):
        for name in ("azimuth", "elevation"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"Camera {name} must be finite, got {getattr(self, name)!r}")
        if self.extent is not None and not (math.isfinite(self.extent) and self.extent > 0):
            raise ValueError(f"Camera extent must be a positive length, got {self.extent!r}")
        if self.perspective is not None and not (
                math.isfinite(self.perspective) and self.perspective > 0):
            raise ValueError("Camera perspective (eye distance) must be positive, got "
                             f"{self.perspective!r}")
        if self.centre is not None:
            c = tuple(float(v) for v in self.centre)
            if len(c) != 3 or not all(map(math.isfinite, c)):
                raise ValueError(f"Camera centre must be 3 finite numbers, got {self.centre!r}")
            object.__setattr__(self, "centre", c)

    def basis(self):
        """(right, up, toward the eye): three orthonormal (3,) NumPy vectors."""
        a, e = math.radians(self.azimuth), math.radians(self.elevation)
        eye = np.array([math.cos(e) * math.cos(a), math.cos(e) * math.sin(a), math.sin(e)])
        right = np.array([-math.sin(a), math.cos(a), 0.0])
        return right, np.cross(eye, right), eye

    def fit(self, *point_sets, size=(1920, 1080)):
        """This camera with ``centre`` and ``extent`` set (those already set kept) so
        that all ``point_sets`` ((n, 3) arrays, NumPy or CuPy, finite) fit an image of
        ``size``; fix them once for all frames of a movie.  Points far from the others
        (:data:`OUTLIER_SPANS`, e.g. an escaped tracer at 1e308) are left out of the
        frame with a warning, so that they do not shrink the rest to a pixel; a
        ValueError when the framed points still span more than floating point can
        hold."""
        sets = [p for p in point_sets if p is not None and len(p)]
        if not sets:
            return dataclasses.replace(self, centre=self.centre or (0.0, 0.0, 0.0),
                                       extent=self.extent or 1.0)
        lo, hi = _framed_box(sets)
        centre = self.centre
        if centre is None:
            centre = tuple(float(v) for v in lo / 2 + hi / 2)
        extent = self.extent
        if extent is None:
            right, up, _ = self.basis()
            c = np.asarray(centre)
            # the projected box of the 3-D bounding box: its 8 corners
            corners = np.array([[(lo, hi)[i][0], (lo, hi)[j][1], (lo, hi)[k][2]]
                                for i in (0, 1) for j in (0, 1) for k in (0, 1)]) - c
            w, h = size
            short = min(w, h)
            with np.errstate(over="ignore", invalid="ignore"):   # inf: refused below
                half_w = np.abs(corners @ right).max()
                half_h = np.abs(corners @ up).max()
                # the shorter side spans extent, the longer extent * long/short
                extent = 1.05 * 2 * max(half_w * short / w, half_h * short / h, 1e-9)
            if not math.isfinite(extent):
                raise ValueError(f"the positions span more than the floating-point "
                                 f"range (coordinates from {lo.min():.3g} to "
                                 f"{hi.max():.3g}), too far apart for any picture")
        return dataclasses.replace(self, centre=centre, extent=float(extent))


#: a point farther than this many inter-quartile spans from the quartiles of the points
#: is left out of the camera's frame (an escaped tracer at 1e308 would shrink the rest
#: to one pixel)
OUTLIER_SPANS = 100.0


def _framed_box(sets):
    """(lo, hi): (3,) NumPy corners of the box that the camera frames: the bounding box
    of the points of ``sets`` ((n, 3) each, NumPy or CuPy) without the outliers, those
    farther than :data:`OUTLIER_SPANS` inter-quartile spans (the largest of the three
    axes) from the quartiles; a warning says how many were left out."""
    points = np.concatenate([to_host(p) for p in sets]).astype(np.float64, copy=False)
    ordered = np.sort(points, axis=0)
    n = len(ordered)
    q1, q3 = ordered[n // 4], ordered[(3 * n) // 4]      # nearest ranks: no arithmetic
    with np.errstate(over="ignore", invalid="ignore"):
        span = float(np.max(q3 - q1))
        reach = OUTLIER_SPANS * span if math.isfinite(span) else math.inf
        inside = np.all((points >= q1 - reach) & (points <= q3 + reach), axis=1)
    left_out = n - int(inside.sum())
    if left_out and left_out < n:
        far = float(np.abs(points[~inside]).max())
        logger.warning("%d of %d points lie far from the others (|coordinate| up to %.3g) "
                       "and are left out of the frame", left_out, n, far)
        points = points[inside]
    return points.min(axis=0), points.max(axis=0)


@functools.lru_cache(maxsize=16)
def colormap_lut(name):
    """(256, 3) float32 RGB in [0, 1] of the matplotlib colour map ``name``, from
    ``LUT_LOW`` to its top (made once per name)."""
    try:
        cmap = require_matplotlib("colour maps").colormaps[name]
    except KeyError:
        raise ValueError(f"unknown colour map {name!r}; e.g. inferno, magma, viridis, "
                         "cividis, Greys_r") from None
    return cmap(np.linspace(LUT_LOW, 1.0, 256))[:, :3].astype(np.float32)


def _check_size(size):
    try:
        w, h = (int(v) for v in size)
    except (TypeError, ValueError):
        raise ValueError(f"size must be (width, height), got {size!r}") from None
    if not (0 < w <= 16384 and 0 < h <= 16384):
        raise ValueError(f"size must be 1..16384 pixels each way, got {w}x{h}")
    return w, h


def _pixels(points, camera, size, xp):
    """Flat pixel index (row 0 at the top) of each point inside the image, and the
    mask of those points."""
    w, h = size
    right, up, eye = camera.basis()
    q = points - xp.asarray(camera.centre, dtype=points.dtype)
    # elementwise rather than a matmul: the same sums in the same order on NumPy and CuPy
    x = q[:, 0] * right[0] + q[:, 1] * right[1] + q[:, 2] * right[2]
    y = q[:, 0] * up[0] + q[:, 1] * up[1] + q[:, 2] * up[2]
    keep = None
    if camera.perspective is not None:
        z = q[:, 0] * eye[0] + q[:, 1] * eye[1] + q[:, 2] * eye[2]
        d = camera.perspective
        keep = z < 0.999 * d
        f = d / xp.where(keep, d - z, 1.0)
        x, y = x * f, y * f
    scale = min(w, h) / camera.extent
    i = xp.floor(x * scale + w / 2)
    j = xp.floor(h / 2 - y * scale)
    # points far out of the frame overflow to ±inf above: they are not inside
    inside = (i >= 0) & (i < w) & (j >= 0) & (j < h)
    if keep is not None:
        inside &= keep
    idx = (j[inside] * w + i[inside]).astype(xp.int64)
    return idx, inside


@dataclasses.dataclass(frozen=True)
class Exposure:
    """How one layer of points is exposed in an image of a given size.

    radius : int [px], the splat's footprint: each point spreads over a Gaussian of
        standard deviation radius / 2 cut at ``radius`` pixels (0: the one pixel it falls in).
    scale : [points per pixel] the opacity scale k: a pixel of splatted density c has the
        opacity ``1 - exp(-c / k)``.
    top : [points per pixel] the density at the top of the colour map.
    values : (lo, hi), the range of the values that the colour map spans, for points
        coloured by values (None: the values' range in the frame).
    """

    radius: int
    scale: float
    top: float
    values: tuple | None = None

    def __post_init__(self):
        given = (self.radius, self.scale, self.top, *(self.values or (0, 0)))
        numbers = len(given) == 5 and all(
            isinstance(v, (int, float, np.number)) and math.isfinite(v) for v in given)
        if not (numbers and int(self.radius) == self.radius <= MAX_RADIUS and self.radius >= 0
                and self.scale > 0 and self.top > 0 and given[3] <= given[4]):
            raise ValueError(f"Exposure needs a radius of 0..{MAX_RADIUS} whole pixels, scale "
                             f"and top > 0, values lo <= hi, all finite; got {self!r}")
        object.__setattr__(self, "radius", int(self.radius))

    @staticmethod
    def shared(a, b):
        """One exposure for frames exposed as ``a`` and ``b``: the larger radius, the
        geometric means of the scales and tops, the union of the value ranges."""
        values = None if a.values is None or b.values is None else (
            min(a.values[0], b.values[0]), max(a.values[1], b.values[1]))
        return Exposure(max(a.radius, b.radius), math.sqrt(a.scale * b.scale),
                        math.sqrt(a.top * b.top), values)


MAX_RADIUS = 64               #: the largest splat radius [px]
DENSITY_CELL = 1 / 64         #: the side of a density cell / the image's shorter side
#: a splat's radius in units of the typical spacing of the points in the image
RADIUS_PER_SPACING = {"tracers": 1.0, "elements": 0.4}
#: the splat radius [fraction of the image's shorter side]: (smallest, largest)
RADIUS_RANGE = {"tracers": (0.0, 1 / 128), "elements": (1 / 300, 1 / 100)}
#: the opacity scale k is this quantile of the nonzero densities divided by the layer's
#: SATURATION (so that the pixel at the quantile has the opacity 1 - exp(-SATURATION));
#: the elements' density is weighted by |α| and exposed from a high quantile, so that
#: the strong cores stand out and a remeshed lattice's weak nodes stay faint
EXPOSURE_QUANTILE = {"tracers": 0.5, "elements": 0.9}
SATURATION = {"tracers": 1.0, "elements": 2.0}
#: the top of the colour map: this quantile of the nonzero densities
TOP_QUANTILE = 0.99
QUANTILE_SAMPLE = 1 << 18     #: the most densities a quantile is taken from (subsampled)


def _splat_radius(idx, size, kind, xp):
    """Splat radius [px] of the points at the flat pixel indices ``idx`` (n,) of an image
    of ``size``: RADIUS_PER_SPACING times their typical spacing, the spacing from the mean
    count of the density cell around a point, clipped to RADIUS_RANGE; 0 below 1."""
    w, h = size
    short = min(w, h)
    lo, hi = (f * short for f in RADIUS_RANGE[kind])
    hi = max(hi, 1.0)
    n = int(idx.shape[0])
    if n:
        cell = max(2, round(DENSITY_CELL * short))
        columns = -(-w // cell)
        counts = xp.bincount((idx // w // cell) * columns + (idx % w) // cell).astype(float)
        per_cell = float((counts * counts).sum()) / n       # a point's cell's mean count
        radius = RADIUS_PER_SPACING[kind] * cell / math.sqrt(per_cell)
    else:
        radius = hi
    radius = min(max(radius, lo), hi, MAX_RADIUS)
    return round(radius) if radius >= 1 else 0


def _blur(image, radius, xp):
    """``image`` (H, W) convolved along both axes with a normalised Gaussian of standard
    deviation radius / 2 cut at ``radius`` pixels (shifted adds: O(pixels * radius))."""
    if radius < 1:
        return image
    d = np.arange(-radius, radius + 1)
    taps = np.exp(-2.0 * (d / radius) ** 2)
    taps = (taps / taps.sum()).astype(np.float32)
    for axis in (0, 1):
        out = image * taps[radius]
        n = image.shape[axis]
        for s in range(1, min(radius, n - 1) + 1):
            lo = (slice(None),) * axis + (slice(s, None),)
            hi = (slice(None),) * axis + (slice(None, n - s),)
            out[lo] += taps[radius + s] * image[hi]
            out[hi] += taps[radius - s] * image[lo]
        image = out
    return image


def _splat(points, values, camera, size, kind, radius, xp):
    """(density (H*W,) float32 [points per pixel], mean value (H*W,) float32 or None,
    the splat radius [px]) of ``points`` drawn with ``radius`` (None: chosen from the
    points' density, :func:`_splat_radius`)."""
    w, h = size
    idx, inside = _pixels(points, camera, size, xp)
    if radius is None:
        radius = _splat_radius(idx, size, kind, xp)
    counts = xp.bincount(idx, minlength=w * h).astype(xp.float32)
    density = _blur(counts.reshape(h, w), radius, xp).reshape(-1)
    mean = None
    if values is not None:
        v = values[inside].astype(xp.float64)
        sums = xp.bincount(idx, weights=v, minlength=w * h)
        sums = _blur(sums.astype(xp.float32).reshape(h, w), radius, xp).reshape(-1)
        mean = sums / xp.maximum(density, xp.float32(1e-30))
        if kind == "elements":          # each element counts as |α| / mean |α| points
            scale = float(v.mean()) if v.shape[0] else 0.0
            if scale > 0:
                density = sums / xp.float32(scale)
    return density, mean, radius


def _exposure(density, radius, kind, xp):
    """The :class:`Exposure` of a layer of splatted ``density`` (H*W,): the opacity scale
    and the colour map's top from quantiles of its nonzero values (EXPOSURE_QUANTILE,
    TOP_QUANTILE)."""
    nonzero = density[density > 0]
    n = int(nonzero.shape[0])
    if n == 0:
        return Exposure(radius, 1.0, 1.0)
    ordered = xp.sort(nonzero[::max(1, n // QUANTILE_SAMPLE)])
    last = int(ordered.shape[0]) - 1
    picks = xp.stack([ordered[int(EXPOSURE_QUANTILE[kind] * last)],
                      ordered[int(TOP_QUANTILE * last)]])
    typical, top = (float(v) for v in to_host(picks))
    scale = typical / SATURATION[kind]
    return Exposure(radius, scale, max(top, scale))


def _shade(density, mean, vrange, lut, exposure, xp):
    """RGB (H*W, 3) float32 and opacity (H*W,) float32 of a layer's ``density``: colour
    at the mean value in ``vrange`` or else at log(1 + c/k) / log(1 + top/k)."""
    k = xp.float32(exposure.scale)
    alpha = 1.0 - xp.exp(-density / k)
    if mean is not None:
        lo, hi = vrange
        t = (mean - xp.float32(lo)) / xp.float32(max(hi - lo, 1e-30))
    else:
        t = xp.log1p(density / k) / xp.float32(math.log1p(exposure.top / exposure.scale))
    index = xp.rint(xp.clip(t, 0.0, 1.0) * 255).astype(xp.int32)
    return xp.asarray(lut)[index], alpha.astype(xp.float32)


def _checked_cloud(xp, name, points, values_name, values):
    """``points`` (n, 3) and ``values`` ((n,) or None) as arrays of ``xp``; a ValueError
    naming them when their shapes do not fit."""
    points = xp.asarray(points)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"Expected {name} of shape (n, 3), got: {points.shape}")
    if values is not None:
        values = xp.asarray(values).reshape(-1)
        if values.shape[0] != points.shape[0]:
            raise ValueError(f"Expected {values_name} of shape ({points.shape[0]},), got: "
                             f"{values.shape}")
    return points, values


def render_points(points, size=(1920, 1080), camera=None, colormap="inferno", values=None,
                  xp=None, *, exposure=None, background=(0, 0, 0), elements=None,
                  element_values=None, element_colormap="cool", element_exposure=None,
                  annotate=False, time=None, units=("L", "T"), exposures=None):
    """Render ``points`` ((n, 3) [L], NumPy or CuPy) into an (H, W, 3) uint8 NumPy image.

    Each point spreads over a small Gaussian footprint (``exposure.radius`` pixels); the
    splatted density c [points per pixel] sets the opacity ``1 - exp(-c / k)`` over
    ``background`` (RGB 0..255) and the colour ``colormap`` at log(1 + c/k) / log(1 +
    top/k) (``values`` (n,): at the footprint-weighted mean value, over ``exposure.values``
    or the values' range).  ``exposure`` (:class:`Exposure`) None: the radius from the
    points' spacing in the image, k and top from quantiles of the density, so that a
    thousand points and a million both look well exposed.  ``elements`` ((m, 3)) with
    ``element_values`` ((m,), e.g. |α|) are drawn over the tracers as dots coloured by
    ``element_colormap``, their opacity from the |α|-weighted density.  ``camera``: :class:`Camera` (default Camera()); its unset
    centre and extent are fitted to the points.  ``xp``: the array module (default: that
    of ``points``).  ``annotate``: add the time stamp (``time`` [T], when given), a scale
    bar and colour bars (:func:`annotate_image`; ``units``: the symbols of the length and
    time units).  ``exposures``: a dict that receives the exposures used, by layer
    ("tracers", "elements"), to pass on to the other frames of a movie."""
    size = _check_size(size)
    w, h = size
    xp = xp or array_namespace(points, elements)
    camera = camera or Camera()
    points, values = _checked_cloud(xp, "points", points, "values", values)
    if elements is not None:
        elements, element_values = _checked_cloud(xp, "elements", elements,
                                                  "element_values", element_values)
    if camera.centre is None or camera.extent is None:
        camera = camera.fit(points, elements, size=size)
    image = xp.empty((w * h, 3), dtype=xp.float32)
    image[:] = xp.asarray(np.asarray(background, dtype=np.float32) / 255)
    layers = [("tracers", points, values, colormap, exposure)]
    if elements is not None:
        layers.append(("elements", elements, element_values, element_colormap,
                       element_exposure))
    bars = []
    for kind, pts, vals, cmap, given in layers:
        if not len(pts):
            continue
        lut = colormap_lut(cmap)
        with np.errstate(over="ignore", invalid="ignore"):    # far points: not drawn
            density, mean, radius = _splat(pts, vals, camera, size, kind,
                                           None if given is None else given.radius, xp)
        used = given or _exposure(density, radius, kind, xp)
        vrange = None
        if vals is not None:
            vrange = used.values or (float(vals.min()), float(vals.max()))
            used = dataclasses.replace(used, values=vrange)
        if exposures is not None:
            exposures[kind] = used
        rgb, alpha = _shade(density, mean, vrange, lut, used, xp)
        image += alpha[:, None] * (rgb - image)
        bars.append(colorbar(kind, lut, used, vrange, camera, size, units))
    out = xp.clip(xp.rint(image * 255), 0, 255).astype(xp.uint8).reshape(h, w, 3)
    out = to_host(out)
    if annotate:
        out = annotate_image(out, camera, time=time, units=units, colorbars=bars,
                             background=background)
    return out


class Frame(typing.NamedTuple):
    """What :func:`read_frame` reads of a snapshot (NumPy float64)."""

    tracers: np.ndarray               # (n, 3) [L]
    elements: np.ndarray | None       # (m, 3) [L], with elements=True
    strength: np.ndarray | None       # (m,) |α| [L³/T], with elements=True
    t: float                          # [T]
    units: tuple                      # the symbols of L and T, e.g. ("L", "T")


def _unit_symbol(text, default):
    """The symbol that a file's ``length_unit`` or ``time_unit`` starts with."""
    m = re.match(r"\s*([^\s,=(;]+)", str(text or ""))
    return m[1] if m else default


def read_frame(path, elements=False, no_verify=False):
    """The :class:`Frame` of the snapshot ``path``, its checksum verified
    (:func:`vortexsim.output.verify.viewed_snapshot`; ``no_verify``: a mismatch is a
    warning).  Raises :class:`vortexsim.output.SnapshotError` (one line) for a file that
    is not a readable snapshot, a checksum mismatch, and positions (or strengths) that
    are not finite: no picture can place them."""
    from ..output.snapshot import SnapshotError  # noqa: PLC0415
    from ..output.verify import viewed_snapshot  # noqa: PLC0415

    snap = viewed_snapshot(path, no_verify)
    el = snap.state["elements"]
    arrays = {"tracer_x": snap.state["tracers"]["x"]}
    if elements:
        arrays.update(element_x=el["x"], element_alpha=el["alpha"])
    arrays = {k: np.asarray(v, dtype=np.float64).reshape(-1, 3) for k, v in arrays.items()}
    for name, values in arrays.items():
        bad = int(np.count_nonzero(~np.isfinite(values).all(axis=1)))
        if bad:
            raise SnapshotError(f"{path}: {name} holds {bad} point(s) with a coordinate that "
                                "is not finite (inf or nan); render draws only finite "
                                "positions: the file is corrupted.")
    units = (_unit_symbol(snap.attrs.get("length_unit"), "L"),
             _unit_symbol(snap.attrs.get("time_unit"), "T"))
    strength = None
    if elements:
        a = arrays["element_alpha"]
        with np.errstate(over="ignore"):
            strength = np.sqrt((a * a).sum(axis=1))
    return Frame(arrays["tracer_x"], arrays.get("element_x"), strength, float(snap.t), units)


def read_points(path, elements=False, no_verify=False):
    """(tracer positions (n, 3), element positions (m, 3) or None, element |α| (m,) or
    None) of the snapshot ``path`` (:func:`read_frame`)."""
    return read_frame(path, elements, no_verify)[:3]


def render_snapshot(path, size=(1920, 1080), camera=None, colormap="inferno", xp=None,
                    elements=False, annotate=True, **options):
    """Render the tracers (and, with ``elements``, the elements coloured by |α|) of the
    snapshot ``path`` (:func:`render_points`; ``xp``: where to compute, default NumPy),
    annotated with its time and the case's units unless ``annotate`` is False."""
    frame = read_frame(path, elements)
    xp = xp or np
    ex, ea = frame.elements, frame.strength
    return render_points(xp.asarray(frame.tracers), size=size, camera=camera,
                         colormap=colormap, xp=xp, elements=None if ex is None else
                         xp.asarray(ex), element_values=None if ea is None else
                         xp.asarray(ea), annotate=annotate, time=frame.t, units=frame.units,
                         **options)


def write_png(image, path):
    """Write the (H, W, 3) or (H, W, 4) uint8 ``image`` as a PNG at ``path``, atomically
    (:func:`vortexsim.output.files.atomic_path`); return ``path``."""
    try:
        from PIL import Image  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(f"writing PNGs needs Pillow: pip install \"{EXTRA}\"") from exc
    image = np.ascontiguousarray(to_host(image))
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (3, 4):
        raise ValueError(f"Expected a uint8 image (H, W, 3|4), got: {image.dtype} {image.shape}")
    with atomic_path(path) as tmp:
        Image.fromarray(image).save(tmp, format="PNG")
    return os.fspath(path)
