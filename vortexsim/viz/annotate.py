"""The annotation of a rendered frame (:func:`vortexsim.viz.render.render_points`): a
time stamp, a scale bar of a round length and the colour bars of its layers, drawn with
matplotlib on a canvas of exactly the frame's size in pixels (:func:`annotate_image`)."""
from __future__ import annotations

import math

import numpy as np

from ..backend import to_host

__all__ = ["annotate_image", "colorbar", "scale_bar_length", "require_matplotlib",
           "MIN_ANNOTATED", "EXTRA"]

#: extra name that installs what pictures and movies need
EXTRA = "vortexsim[viz]"


def require_matplotlib(what):
    """The matplotlib module; an ImportError naming the extra when it is missing."""
    try:
        import matplotlib  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(f"{what} need matplotlib: pip install \"{EXTRA}\"") from exc
    return matplotlib

MIN_ANNOTATED = 120           #: [px] frames with a shorter side are not annotated
#: pixels per inch of the annotation's canvas: a power of two, so that the canvas has
#: exactly the image's size in pixels
_DPI = 64


def _nice(value):
    """The largest of 1, 2, 5 times a power of ten that is at most ``value`` (> 0)."""
    e = 10.0 ** math.floor(math.log10(value) + 1e-9)
    return max(m * e for m in (1, 2, 5) if m * e <= value * (1 + 1e-9))


def _label(value):
    """A tick label: ``0.05``, ``200``, ``2×10⁵``."""
    if value == 0 or 1e-3 <= abs(value) < 1e4:
        return f"{value:.4g}"
    mantissa, exponent = f"{value:.2e}".split("e")
    power = f"10{str(int(exponent)).translate(_SUPERSCRIPT)}"
    return power if float(mantissa) == 1 else f"{float(mantissa):.3g}×{power}"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _density_ticks(exposure, per_area):
    """Ticks (position in [0, 1] on the colour bar, label) of the densities [points per
    L²] that log(1 + c/k) / log(1 + top/k) maps there (``per_area``: pixels per L²): the
    top, round values below it, 0."""
    k, top = exposure.scale * per_area, exposure.top * per_area
    span = math.log1p(top / k)
    ticks = [(1.0, _label(float(f"{top:.2g}")))]
    value = _nice(top)
    while len(ticks) < 8:
        t = math.log1p(value / k) / span
        if t < 0.1:
            break
        if ticks[-1][0] - t >= 0.14:
            ticks.append((t, _label(value)))
        lead = round(value / 10.0 ** math.floor(math.log10(value) + 1e-9))
        value = value * (0.4 if lead == 5 else 0.5)   # 5, 2, 1, 0.5, ...
    return [(0.0, "0"), *reversed(ticks)]


def _value_ticks(vrange):
    """Ticks (position in [0, 1], label) of round values in ``vrange`` (lo, hi)."""
    lo, hi = vrange
    if not hi > lo:
        return [(0.5, _label(lo))]
    step = _nice((hi - lo) / 4)
    first = math.ceil(lo / step) * step
    values = [first + i * step for i in range(6) if first + i * step <= hi * (1 + 1e-9)]
    return [((v - lo) / (hi - lo), _label(v)) for v in values]


def colorbar(kind, lut, exposure, vrange, camera, size, units):
    """(lut, ticks, title) of the colour bar of a layer (:func:`render_points`)."""
    length, time_unit = units
    if vrange is not None:
        title = f"|α| [{length}³/{time_unit}]" if kind == "elements" else "value"
        return lut, _value_ticks(vrange), title
    per_length = min(size) / camera.extent
    return lut, _density_ticks(exposure, per_length ** 2), f"{kind} per {length}²"


def scale_bar_length(camera, size):
    """(length [L], pixels): the round length (1, 2 or 5 times a power of ten) of the
    scale bar, at most a fifth of the image's width, at the camera's centre."""
    per_length = min(size) / camera.extent
    length = _nice(0.2 * size[0] / per_length)
    return length, length * per_length


def annotate_image(image, camera, *, time=None, units=("L", "T"), colorbars=(),
                   background=(0, 0, 0)):
    """``image`` ((H, W, 3) uint8, rendered with ``camera``) with a time stamp ``t = …
    T`` at the top left (``time`` [T], when given), a scale bar at the bottom left (a
    round length in L, :func:`scale_bar_length`) and the ``colorbars`` ((lut (256, 3),
    [(position in [0, 1], label), ...], title) each) at the right; drawn with matplotlib
    on a canvas of exactly the image's size; the rest of the image is unchanged.  Frames
    with a shorter side under MIN_ANNOTATED pixels come back as they are."""
    image = np.ascontiguousarray(to_host(image))
    h, w = image.shape[:2]
    if min(w, h) < MIN_ANNOTATED:
        return image
    require_matplotlib("annotations")
    from matplotlib import patheffects  # noqa: PLC0415
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415
    from matplotlib.lines import Line2D  # noqa: PLC0415
    length, time_unit = units
    dark = sum(background) < 3 * 128
    fg, halo = ("white", "black") if dark else ("black", "white")
    short = min(w, h)
    font = max(9.0, short / 40)                      # [px]
    pt = 72 / _DPI                                   # points per pixel
    margin = round(short / 30)
    fig = Figure(figsize=(w / _DPI, h / _DPI), dpi=_DPI,
                 facecolor=np.asarray(background) / 255)
    canvas = FigureCanvasAgg(fig)
    fig.figimage(image, xo=0, yo=0, origin="upper", resize=False)
    effects = [patheffects.withStroke(linewidth=font * pt / 5, foreground=halo)]
    style = {"color": fg, "fontsize": font * pt, "path_effects": effects}
    if time is not None:
        fig.text(margin / w, 1 - margin / h, f"t = {time:.4g} {time_unit}", ha="left",
                 va="top", **style)
    bar, pixels = scale_bar_length(camera, (w, h))
    y = margin / h
    thick = max(2.0, short / 200) * pt
    fig.add_artist(Line2D([margin / w, (margin + pixels) / w], [y, y], color=fg,
                          linewidth=thick, solid_capstyle="butt", path_effects=[
                              patheffects.Stroke(linewidth=thick + 2 * pt, foreground=halo),
                              patheffects.Normal()]))
    fig.text((margin + pixels / 2) / w, y + 0.4 * font / h, f"{bar:g} {length}",
             ha="center", va="bottom", **style)
    width, height = max(6, round(short / 60)), round(0.35 * h)
    right = w - margin
    for lut, ticks, title in reversed(list(colorbars)):
        left = right - 4.5 * font - width
        cax = fig.add_axes([left / w, 0.5 - height / 2 / h, width / w, height / h],
                           zorder=2)
        cax.imshow(np.asarray(lut)[:, None, :], origin="lower", aspect="auto",
                   extent=(0, 1, 0, 1), interpolation="nearest")
        cax.set_xticks([])
        cax.yaxis.tick_right()
        cax.set_yticks([t for t, _ in ticks], [label for _, label in ticks])
        cax.tick_params(colors=fg, labelsize=0.8 * font * pt, width=pt, length=0.3 * font * pt)
        for label in cax.get_yticklabels():
            label.set_path_effects(effects)
        for spine in cax.spines.values():
            spine.set_edgecolor(fg)
        fig.text((left + width / 2) / w, 0.5 + (height / 2 + 0.4 * font) / h, title,
                 ha="center", va="bottom", **{**style, "fontsize": 0.8 * font * pt})
        right = left - 2 * font
    canvas.draw()
    return np.ascontiguousarray(np.asarray(canvas.buffer_rgba())[:, :, :3])
