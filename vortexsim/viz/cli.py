"""``vortexsim render RUN_DIR``: PNG frames of a run's snapshots (tracers splatted with
density-based opacity, optionally the elements coloured by |α|), annotated with the time,
a scale bar and colour bars, and optionally a movie."""
from __future__ import annotations

import glob
import logging
import os
import re
import time

from ..output.verify import NO_VERIFY_HELP

logger = logging.getLogger(__name__)

__all__ = ["add_command", "cmd_render"]


def add_command(subparsers, common):
    """Add the ``render`` subcommand to ``subparsers`` (``common``: the -v/-q parent)."""
    r = subparsers.add_parser(
        "render", parents=[common], help="render a run's snapshots to PNG frames and a movie",
        description="Render every snapshot (or every K-th) of a run directory: its tracers "
                    "splatted with density-based opacity (and with --elements its vortex "
                    "elements coloured by |alpha|) into PNG frames with the time, a scale "
                    "bar and colour bars; one camera, size and exposure for all frames "
                    "(splat size and opacity chosen from the first and last snapshots); "
                    "optionally a movie (MP4 needs the extra vortexsim[viz]; .gif with "
                    "Pillow).")
    r.add_argument("run_dir", metavar="RUN_DIR")
    r.add_argument("--out", metavar="DIR_or_PNG",
                   help="folder of the frames render_<iteration>.png (default RUN_DIR/frames)"
                        ", or a .png file: only the newest snapshot, to that file")
    r.add_argument("--movie", metavar="OUT.mp4", help="also write a movie (.mp4 or .gif)")
    r.add_argument("--fps", type=float, default=10.0, help="movie frames per second (10)")
    r.add_argument("--size", default="1920x1080", metavar="WxH",
                   help="image size in pixels (default 1920x1080)")
    r.add_argument("--view", default="-90,15", metavar="AZIMUTH,ELEVATION",
                   help="camera direction in degrees (default -90,15: along +y, x to the "
                        "right, z up, 15 degrees from above; write a negative azimuth as "
                        "--view=-90,15)")
    r.add_argument("--colormap", default="inferno", help="matplotlib colour map (inferno)")
    r.add_argument("--elements", action="store_true",
                   help="draw the vortex elements over the tracers, coloured by |alpha|")
    r.add_argument("--no-annotate", action="store_true",
                   help="bare frames: no time stamp, scale bar or colour bars")
    r.add_argument("--every", type=int, default=1, metavar="K",
                   help="render every K-th snapshot (the newest always)")
    r.add_argument("--device", choices=("cpu", "gpu", "auto"), default="auto",
                   help="where to render (auto: the GPU when CuPy sees one)")
    r.add_argument("--no-verify", action="store_true", help=NO_VERIFY_HELP)
    r.set_defaults(func=cmd_render)
    return r


def _parse_size(text, UsageError):
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text or "")
    if not m or not (0 < int(m[1]) <= 16384 and 0 < int(m[2]) <= 16384):
        raise UsageError(f"--size {text!r}: expected WxH, 1..16384 pixels each, "
                         "e.g. 1920x1080")
    return int(m[1]), int(m[2])


def _parse_view(text, UsageError):
    try:
        az, el = (float(v) for v in text.split(","))
    except (ValueError, AttributeError):
        raise UsageError(f"--view {text!r}: expected AZIMUTH,ELEVATION in degrees, "
                         "e.g. -90,15") from None
    if not (abs(az) <= 360 and abs(el) <= 90):
        raise UsageError(f"--view {text!r}: azimuth in [-360, 360], elevation in [-90, 90]")
    return az, el


def cmd_render(args, argv):
    """Handler of ``vortexsim render``; returns the exit code."""
    from vortexsim.cli import UsageError  # noqa: PLC0415 - circular otherwise

    from ..backend import resolve_device  # noqa: PLC0415
    from ..output.snapshot import SnapshotError  # noqa: PLC0415
    from ..output.writers import snapshot_files  # noqa: PLC0415
    from .movie import EXTRA, mp4_available, write_movie  # noqa: PLC0415
    from .render import (  # noqa: PLC0415
        Camera,
        Exposure,
        colormap_lut,
        read_frame,
        render_points,
        write_png,
    )

    run_dir = args.run_dir
    if not os.path.isdir(run_dir):
        raise UsageError(f"{run_dir} is not a directory; give a run directory "
                         "(with snapshot_*.nc).")
    snaps = [path for _, path in sorted(snapshot_files(run_dir).items())]
    if not snaps:
        raise UsageError(f"{run_dir} is not a run directory: it has no snapshot_*.nc.")
    size = _parse_size(args.size, UsageError)
    az, el = _parse_view(args.view, UsageError)
    if args.every < 1:
        raise UsageError(f"--every {args.every}: give a positive integer.")
    if not args.fps > 0:
        raise UsageError(f"--fps {args.fps:g}: give a positive number.")
    try:
        colormap_lut(args.colormap)
    except (ValueError, ImportError) as exc:
        raise UsageError(f"--colormap: {exc}") from None
    if args.movie:
        suffix = os.path.splitext(args.movie)[1].lower()
        if suffix not in (".mp4", ".gif"):
            raise UsageError(f"--movie {args.movie}: give a .mp4 or .gif path.")
        if suffix == ".mp4" and not mp4_available():
            raise UsageError(f"--movie {args.movie}: MP4 needs imageio and imageio-ffmpeg: "
                             f"pip install \"{EXTRA}\" (or give a .gif path).")
    try:
        device = resolve_device(args.device)
    except (RuntimeError, ValueError) as exc:
        raise UsageError(f"--device {args.device}: {exc}") from None
    xp = device.xp

    single = bool(args.out) and args.out.lower().endswith(".png")
    chosen = [snaps[-1]] if single else snaps[::args.every]
    if chosen[-1] != snaps[-1]:
        chosen.append(snaps[-1])
    out_dir = os.path.dirname(os.path.abspath(args.out)) if single else \
        (args.out or os.path.join(run_dir, "frames"))
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"--out {out_dir} is a file, not a directory.")

    def read(path):
        try:
            return read_frame(path, elements=args.elements, no_verify=args.no_verify)
        except SnapshotError as exc:
            raise UsageError(str(exc).splitlines()[0]) from None

    def render(frame, camera, annotate, fixed, found=None):
        """The image of ``frame`` with the exposures ``fixed`` (kind: Exposure; a kind
        missing: chosen for this frame, and put into ``found``)."""
        ex, ea = frame.elements, frame.strength
        try:
            return render_points(
                xp.asarray(frame.tracers), size=size, camera=camera, colormap=args.colormap,
                xp=xp, elements=None if ex is None else xp.asarray(ex),
                element_values=None if ea is None else xp.asarray(ea),
                exposure=fixed.get("tracers"), element_exposure=fixed.get("elements"),
                annotate=annotate, time=frame.t, units=frame.units, exposures=found)
        except ValueError as exc:
            raise UsageError(f"{run_dir}: {str(exc).splitlines()[0]}") from None

    # one camera for all frames: the box of the first and the last snapshot
    first = read(chosen[0])
    last = first if len(chosen) == 1 else read(chosen[-1])
    try:
        both = (first[0], first[1]) + (() if last is first else (last[0], last[1]))
        camera = Camera(azimuth=az, elevation=el).fit(*both, size=size)
    except ValueError as exc:
        raise UsageError(f"{run_dir}: {exc}; the snapshots are corrupted.") from None
    # one exposure for all frames: shared between those of the first and the last
    exposure = {}
    if last is not first:
        at_first, at_last = {}, {}
        render(first, camera, False, {}, at_first)
        render(last, camera, False, {}, at_last)
        exposure = {kind: Exposure.shared(at_first[kind], at_last[kind])
                    for kind in at_first if kind in at_last}
        logger.debug("exposure of all frames: %s", exposure)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the output directory {out_dir}: {exc}") from None
    if not single:            # frames of an earlier call: another camera, size or selection
        written = {os.path.basename(p).replace("snapshot_", "render_").replace(".nc", ".png")
                   for p in chosen}
        stale = [f for f in glob.glob(os.path.join(glob.escape(out_dir), "render_*.png"))
                 if os.path.basename(f) not in written]
        for f in stale:
            os.remove(f)
        if stale:
            logger.info("removed %d frames of an earlier render from %s", len(stale), out_dir)
    frames = []
    for k, path in enumerate(chosen):
        t0 = time.perf_counter()
        frame = first if k == 0 else (last if k == len(chosen) - 1 else read(path))
        image = render(frame, camera, not args.no_annotate, exposure)
        name = os.path.basename(path).replace("snapshot_", "render_").replace(".nc", ".png")
        png = args.out if single else os.path.join(out_dir, name)
        write_png(image, png)
        frames.append(png)
        logger.info("%s -> %s (%d tracers, %.2f s)", os.path.basename(path), png,
                    len(frame.tracers), time.perf_counter() - t0)
    if args.movie:
        path, kind = write_movie(frames, args.movie, fps=args.fps)
        logger.info("movie: %s (%s, %d frames)", path, kind, len(frames))
    return 0
