"""A movie of frames: MP4 (imageio + imageio-ffmpeg, the extra ``vortexsim[viz]``), GIF
(Pillow) or, last, a directory of PNG frames."""
from __future__ import annotations

import logging
import os

import numpy as np

from ..output.files import atomic_path
from .annotate import EXTRA

logger = logging.getLogger(__name__)

__all__ = ["write_movie", "mp4_available", "MissingDependency", "EXTRA"]


class MissingDependency(ImportError):
    """A movie format whose library is not installed (the message names the extra)."""


def mp4_available():
    """True when imageio and imageio-ffmpeg (with its ffmpeg binary) can be used."""
    try:
        import imageio  # noqa: F401, PLC0415
        import imageio_ffmpeg  # noqa: PLC0415
        imageio_ffmpeg.get_ffmpeg_exe()
    except Exception:  # noqa: BLE001 - not importable, or no ffmpeg binary
        return False
    return True


def _frames(frames_or_paths):
    """Each frame as an (H, W, 3) uint8 array (paths read with Pillow), lazily."""
    for f in frames_or_paths:
        if isinstance(f, (str, os.PathLike)):
            from PIL import Image  # noqa: PLC0415
            with Image.open(f) as im:
                f = np.asarray(im.convert("RGB"))
        f = np.asarray(f)
        if f.dtype != np.uint8 or f.ndim != 3 or f.shape[2] != 3:
            raise ValueError(f"Expected frames of uint8 (H, W, 3), got: {f.dtype} {f.shape}")
        yield f


def _even(f):
    """The frame padded (edge pixels) to even width and height (H.264's yuv420p)."""
    h, w = f.shape[:2]
    if h % 2 or w % 2:
        f = np.pad(f, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    return f


def _write_mp4(frames, path, fps):
    import imageio.v2 as imageio  # noqa: PLC0415
    n = 0
    with atomic_path(path) as tmp:
        # imageio picks the writer by suffix: write tmp.mp4, then move it onto tmp
        part = tmp + ".mp4"
        try:
            with imageio.get_writer(part, format="FFMPEG", mode="I", fps=fps,
                                    codec="libx264", pixelformat="yuv420p",
                                    macro_block_size=1, quality=8) as writer:
                for f in frames:
                    writer.append_data(_even(f))
                    n += 1
            if n == 0:
                raise ValueError("no frames to write")
            os.replace(part, tmp)
        finally:
            if os.path.exists(part):
                os.remove(part)
    return n


def _write_gif(frames, path, fps):
    from PIL import Image  # noqa: PLC0415
    frames = iter(frames)
    first = next(frames, None)
    if first is None:
        raise ValueError("no frames to write")
    rest = [Image.fromarray(f) for f in frames]
    with atomic_path(path) as tmp:
        Image.fromarray(first).save(tmp, format="GIF", save_all=True, append_images=rest,
                                    duration=max(1, round(1000 / fps)), loop=0)
    return 1 + len(rest)


def _write_dir(frames, path):
    from .render import write_png  # noqa: PLC0415
    os.makedirs(path, exist_ok=True)
    n = 0
    for n, f in enumerate(frames, 1):
        write_png(f, os.path.join(path, f"frame_{n - 1:05d}.png"))
    if n == 0:
        raise ValueError("no frames to write")
    return n


def write_movie(frames_or_paths, path, fps=10, fallback=False):
    """Write a movie of ``frames_or_paths`` ((H, W, 3) uint8 arrays or image paths, all
    of one size) at ``fps`` frames per second; return (the path written, its kind:
    "mp4", "gif" or "frames").

    The kind follows the suffix of ``path``: ``.mp4`` through imageio-ffmpeg, ``.gif``
    through Pillow, anything else a directory of PNG frames ``frame_00000.png``, ....
    An MP4 without imageio-ffmpeg raises :class:`MissingDependency` naming the extra
    ``vortexsim[viz]``, unless ``fallback``: then a warning, and a GIF next to it (the
    same name, ``.gif``), or where Pillow fails too, a directory of frames (``_frames``).
    Files are written atomically.
    """
    if not (fps > 0):
        raise ValueError(f"fps must be positive, got {fps!r}")
    path = os.fspath(path)
    stem, suffix = os.path.splitext(path)
    suffix = suffix.lower()
    frames = list(frames_or_paths) if fallback else frames_or_paths
    if suffix == ".mp4":
        if mp4_available():
            n = _write_mp4(_frames(frames), path, fps)
            logger.info("wrote %s: MP4, %d frames at %g fps", path, n, fps)
            return path, "mp4"
        if not fallback:
            raise MissingDependency(
                f"writing {path} (MP4) needs imageio and imageio-ffmpeg: pip install "
                f"\"{EXTRA}\" (or write a GIF: a .gif path)")
        logger.warning("imageio-ffmpeg is missing (pip install \"%s\" for MP4); "
                       "writing a GIF instead", EXTRA)
        path, suffix = stem + ".gif", ".gif"
    if suffix == ".gif":
        try:
            n = _write_gif(_frames(frames), path, fps)
            logger.info("wrote %s: GIF, %d frames at %g fps", path, n, fps)
            return path, "gif"
        except ImportError as exc:
            if not fallback:
                raise MissingDependency(f"writing {path} (GIF) needs Pillow: pip install "
                                        f"\"{EXTRA}\"") from exc
            logger.warning("Pillow is missing (%s); writing PNG frames instead", exc)
            path = stem + "_frames"
    n = _write_dir(_frames(frames), path)
    logger.info("wrote %s/: %d PNG frames (play at %g fps)", path, n, fps)
    return path, "frames"
