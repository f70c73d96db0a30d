"""Pictures and movies of runs: tracers splatted into images with density-based opacity
(:mod:`.render`), movies of frames (:mod:`.movie`), the ``vortexsim render`` command
(:mod:`.cli`).  Needs matplotlib (colour maps) and Pillow (PNG, GIF); MP4 needs the extra
``vortexsim[viz]`` (imageio, imageio-ffmpeg)."""
from __future__ import annotations

from .movie import write_movie
from .render import Camera, read_points, render_points, render_snapshot, write_png

__all__ = ["Camera", "read_points", "render_points", "render_snapshot", "write_png",
           "write_movie"]
