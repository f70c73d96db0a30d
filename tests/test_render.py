"""vortexsim.viz: tracer rendering, PNG, movies, the ``render`` subcommand (issue 18)."""
from __future__ import annotations

import argparse
import glob
import os

import numpy as np
import pytest

from vortexsim.viz import Camera, render_points, write_movie, write_png
from vortexsim.viz import movie as movie_mod
from vortexsim.viz import render as render_mod
from vortexsim.viz.cli import add_command
from vortexsim.viz.render import Exposure, annotate_image, read_frame, scale_bar_length

SIZE = (160, 90)


def ring(n=20000, z=0.0, seed=0):
    rng = np.random.default_rng(seed)
    phi = rng.uniform(0, 2 * np.pi, n)
    r = 1 + 0.05 * rng.standard_normal(n)
    return np.column_stack([r * np.cos(phi), r * np.sin(phi), z + 0.05 * rng.standard_normal(n)])


CAM = Camera(centre=(0, 0, 0.5), extent=3.0)


def test_ring_image_not_empty():
    im = render_points(ring(), size=SIZE)
    assert im.shape == (90, 160, 3) and im.dtype == np.uint8
    lit = im.max(axis=2) > 0
    assert 0.02 < lit.mean() < 0.9
    # orthographic from -y, x to the right: the image is symmetric left-right (roughly)
    assert abs(int(lit[:, :80].sum()) - int(lit[:, 80:].sum())) < 0.1 * lit.sum()


def test_moving_ring_frames_differ():
    a = render_points(ring(z=0.0), size=SIZE, camera=CAM)
    b = render_points(ring(z=0.6), size=SIZE, camera=CAM)
    differ = (a != b).any(axis=2)
    assert differ.mean() > 0.05
    # the ring moved up: its lit rows moved up (row 0 at the top)
    rows = np.arange(SIZE[1])
    centre = [np.average(rows, weights=im.max(axis=2).sum(axis=1)) for im in (a, b)]
    assert centre[1] < centre[0] - 5


def test_colormap_size_view_options():
    p = ring()
    a = render_points(p, size=(64, 48), camera=CAM, colormap="inferno")
    b = render_points(p, size=(64, 48), camera=CAM, colormap="viridis")
    assert a.shape == (48, 64, 3) and not np.array_equal(a, b)
    top = render_points(p, size=(64, 48), camera=Camera(elevation=90, centre=(0, 0, 0),
                                                        extent=3.0))
    assert not np.array_equal(top, render_points(p, size=(64, 48), camera=Camera(
        elevation=0, centre=(0, 0, 0), extent=3.0)))
    persp = render_points(p, size=(64, 48), camera=Camera(centre=(0, 0, 0), extent=3.0,
                                                          perspective=4.0))
    assert persp.max() > 0
    with pytest.raises(ValueError, match="colour map"):
        render_points(p, size=(64, 48), colormap="no-such-map")
    with pytest.raises(ValueError, match="size"):
        render_points(p, size=(0, 48))
    with pytest.raises(ValueError, match=r"\(n, 3\)"):
        render_points(p[:, :2])


def test_elements_and_values():
    p = ring()
    base = render_points(p, size=SIZE, camera=CAM)
    el = ring(200, seed=1)
    with_el = render_points(p, size=SIZE, camera=CAM, elements=el,
                            element_values=np.linspace(0, 1, 200))
    assert not np.array_equal(base, with_el)
    coloured = render_points(p, size=SIZE, camera=CAM, values=p[:, 0])
    assert not np.array_equal(base, coloured)
    empty = render_points(np.zeros((0, 3)), size=SIZE, background=(10, 20, 30))
    assert (empty == np.array([10, 20, 30], np.uint8)).all()


def test_write_png_roundtrip(tmp_path):
    from PIL import Image
    im = render_points(ring(), size=SIZE, camera=CAM)
    path = write_png(im, tmp_path / "a.png")
    with Image.open(path) as f:
        back = np.asarray(f.convert("RGB"))
    np.testing.assert_array_equal(back, im)
    assert os.listdir(tmp_path) == ["a.png"]          # no temporary left


def _frames(k=4):
    return [render_points(ring(2000, z=0.2 * i), size=(63, 41), camera=CAM) for i in range(k)]


def test_movie_mp4(tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    if not movie_mod.mp4_available():
        pytest.skip("no ffmpeg binary")
    path, kind = write_movie(_frames(), tmp_path / "m.mp4", fps=5)
    assert kind == "mp4" and os.path.getsize(path) > 0
    import imageio_ffmpeg
    with open(path, "rb") as fh:
        assert fh.read(12)[4:8] == b"ftyp"                 # an MP4 container
    assert imageio_ffmpeg.count_frames_and_secs(path)[0] == 4
    assert not [f for f in os.listdir(tmp_path) if f != "m.mp4"]   # no temporaries


def test_movie_gif_and_fallbacks(tmp_path, monkeypatch):
    from PIL import Image
    frames = _frames(3)
    path, kind = write_movie(frames, tmp_path / "m.gif", fps=5)
    assert kind == "gif"
    with Image.open(path) as g:
        assert g.n_frames == 3 and g.size == (63, 41)
    monkeypatch.setattr(movie_mod, "mp4_available", lambda: False)
    with pytest.raises(ImportError, match=r"vortexsim\[viz\]"):
        write_movie(frames, tmp_path / "x.mp4")
    path, kind = write_movie(frames, tmp_path / "y.mp4", fallback=True)
    assert kind == "gif" and path.endswith("y.gif") and os.path.exists(path)
    path, kind = write_movie(frames, tmp_path / "frames")
    assert kind == "frames" and len(os.listdir(path)) == 3


def _render(argv):
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=0)
    common.add_argument("-q", "--quiet", action="count", default=0)
    p = argparse.ArgumentParser(prog="vortexsim")
    add_command(p.add_subparsers(dest="command"), common)
    args = p.parse_args(argv)
    return args.func(args, argv)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from vortexsim.cli import main
    out = tmp_path_factory.mktemp("run") / "ring"
    assert main(["run", "single_ring", "--set", "n_phi=16", "--set", "t_end=0.2",
                 "--set", "output.snapshot_interval=0.1", "--set", "tracers_per_ring=2000",
                 "--out", str(out), "-q"]) == 0
    return out


def test_render_command(tiny_run, tmp_path):
    snaps = sorted(glob.glob(str(tiny_run / "snapshot_*.nc")))
    assert len(snaps) >= 2
    frames = tmp_path / "frames"
    assert _render(["render", str(tiny_run), "--out", str(frames), "--size", "80x60",
                    "--view=-90,30", "--elements", "--movie", str(tmp_path / "m.gif"),
                    "-q"]) == 0
    pngs = sorted(os.listdir(frames))
    assert len(pngs) == len(snaps) and pngs[0].startswith("render_")
    from PIL import Image
    with Image.open(frames / pngs[0]) as a, Image.open(frames / pngs[-1]) as b:
        assert a.size == (80, 60)
        a, b = np.asarray(a), np.asarray(b)
    assert a.max() > 0 and (a != b).any()
    assert os.path.getsize(tmp_path / "m.gif") > 0
    one = tmp_path / "last.png"
    assert _render(["render", str(tiny_run), "--out", str(one), "--size", "40x30"]) == 0
    assert one.exists()


def test_a_second_render_into_the_folder_leaves_only_its_frames(tiny_run, tmp_path):
    """Frames of an earlier call (another size; one of a snapshot this call does not
    render) are removed, so that the folder holds one call's frames, one camera and size;
    other files stay."""
    frames = tmp_path / "frames"
    assert _render(["render", str(tiny_run), "--out", str(frames), "--size", "40x30",
                    "-q"]) == 0
    stale = frames / "render_99999999.png"
    stale.write_bytes((frames / sorted(os.listdir(frames))[0]).read_bytes())
    (frames / "notes.txt").write_text("mine")
    assert _render(["render", str(tiny_run), "--out", str(frames), "--size", "60x40",
                    "-q"]) == 0
    snaps = sorted(glob.glob(str(tiny_run / "snapshot_*.nc")))
    pngs = sorted(f for f in os.listdir(frames) if f.startswith("render_"))
    assert not stale.exists() and len(pngs) == len(snaps)
    from PIL import Image
    for f in pngs:
        with Image.open(frames / f) as im:
            assert im.size == (60, 40)
    assert (frames / "notes.txt").read_text() == "mine"


def test_run_overwrite_removes_the_old_runs_frames(tmp_path):
    from vortexsim.cli import main
    out = tmp_path / "run"
    args = ["run", "single_ring", "--set", "n_phi=8", "--set", "t_end=0.2", "--set",
            "tracers_per_ring=50", "--out", str(out), "-q"]
    assert main(args) == 0
    assert _render(["render", str(out), "--size", "40x30", "-q"]) == 0
    assert any((out / "frames").iterdir())
    assert main(args + ["--overwrite"]) == 0
    assert not list((out / "frames").glob("render_*.png"))


def test_render_command_bad_input(tiny_run, tmp_path):
    from vortexsim.cli import UsageError
    with pytest.raises(UsageError, match="not a run directory"):
        _render(["render", str(tmp_path)])
    with pytest.raises(UsageError, match="not a directory"):
        _render(["render", str(tmp_path / "missing")])
    for opts, what in ((["--size", "big"], "--size"), (["--view", "1"], "--view"),
                       (["--every", "0"], "--every"), (["--movie", "m.avi"], "--movie"),
                       (["--colormap", "nope"], "--colormap")):
        with pytest.raises(UsageError, match=what):
            _render(["render", str(tiny_run), "--out", str(tmp_path / "f")] + opts)


#: a pixel is lit when a channel is this far (of 255) above the black background
LIT = 10
DEFAULT = (1920, 1080)
#: an annotated test frame (the shorter side above annotate.MIN_ANNOTATED)
ANNOTATED = (480, 270)


def lit_fraction(image):
    return float((image.max(axis=2) > LIT).mean())


def test_a_thousand_tracers_light_a_default_frame():
    """2^10 tracers (the leapfrog CPU default) at the default size: >= 2 % of the pixels
    lit (one pixel per tracer would light 0.05 %)."""
    found = {}
    image = render_points(ring(1 << 10), size=DEFAULT, exposures=found)
    assert image.shape == (1080, 1920, 3)
    assert 0.02 <= lit_fraction(image) < 0.6
    assert found["tracers"].radius >= 3


def test_a_quarter_million_points_are_not_saturated():
    """2^18 points: smaller splats, a frame lit but not washed out, and densities that
    still show (more than a few colours)."""
    few, many = {}, {}
    render_points(ring(1 << 10), size=DEFAULT, exposures=few)
    image = render_points(ring(1 << 18), size=DEFAULT, exposures=many)
    assert 0.02 <= lit_fraction(image) < 0.6
    assert many["tracers"].radius < few["tracers"].radius
    assert many["tracers"].scale > few["tracers"].scale
    lit = image.max(axis=2) > LIT
    assert len(np.unique(image[lit].reshape(-1, 3), axis=0)) > 50


def test_exposure_given_is_used_and_checked():
    p = ring(1 << 10)
    found = {}
    auto = render_points(p, size=ANNOTATED, camera=CAM, exposures=found)
    again = render_points(p, size=ANNOTATED, camera=CAM, exposure=found["tracers"])
    np.testing.assert_array_equal(auto, again)
    dim = render_points(p, size=ANNOTATED, camera=CAM, exposure=Exposure(
        found["tracers"].radius, 10 * found["tracers"].scale, found["tracers"].top))
    assert lit_fraction(dim) < lit_fraction(auto)
    for bad in ((1.5, 1.0, 1.0), (2, 0.0, 1.0), (2, 1.0, float("nan")), (2, 1.0, 1.0, (2, 1))):
        with pytest.raises(ValueError, match="Exposure needs"):
            Exposure(*bad)
    shared = Exposure.shared(Exposure(2, 1.0, 4.0, (0, 1)), Exposure(3, 4.0, 16.0, (-1, 0.5)))
    assert shared == Exposure(3, 2.0, 8.0, (-1.0, 1.0))


def _regions(shape):
    """Masks of the annotation corners: time stamp (top left), scale bar (bottom left),
    colour bars (right), and the middle band that none of them touches."""
    h, w = shape[:2]
    y, x = np.mgrid[0:h, 0:w]
    return {"stamp": (x < 0.35 * w) & (y < 0.2 * h), "scale": (x < 0.35 * w) & (y > 0.8 * h),
            "bars": x > 0.65 * w, "middle": (x > 0.37 * w) & (x < 0.63 * w)}


def test_annotation_adds_time_stamp_scale_bar_and_colour_bar_only():
    p = ring(1 << 12)
    bare = render_points(p, size=ANNOTATED, camera=CAM)
    t1 = render_points(p, size=ANNOTATED, camera=CAM, annotate=True, time=1.5)
    t2 = render_points(p, size=ANNOTATED, camera=CAM, annotate=True, time=2.5)
    assert t1.shape == bare.shape == (270, 480, 3) and t1.dtype == np.uint8
    region = _regions(bare.shape)
    changed = (t1 != bare).any(axis=2)
    for name in ("stamp", "scale", "bars"):
        assert changed[region[name]].sum() > 50, name
    assert not changed[region["middle"]].any()
    assert not changed[~(region["stamp"] | region["scale"] | region["bars"])].any()
    # another time changes the stamp only
    moved = (t1 != t2).any(axis=2)
    assert moved.any() and not moved[~region["stamp"]].any()
    # no time: no stamp
    untimed = render_points(p, size=ANNOTATED, camera=CAM, annotate=True)
    assert not (untimed != bare).any(axis=2)[region["stamp"]].any()


def test_scale_bar_is_a_round_length_of_the_right_pixels():
    camera = Camera(centre=(0, 0, 0), extent=3.0)
    length, pixels = scale_bar_length(camera, ANNOTATED)
    assert length == 1.0 and pixels == pytest.approx(90.0)     # 270 px span 3 L
    image = annotate_image(np.zeros((270, 480, 3), np.uint8), camera)
    white = (image.min(axis=2) > 200)[:, : 480 // 2]
    runs = white.sum(axis=1)
    assert abs(int(runs.max()) - 90) <= 2                    # the bar's row
    assert scale_bar_length(Camera(centre=(0, 0, 0), extent=0.03), ANNOTATED)[0] == 0.01
    small = annotate_image(np.zeros((60, 80, 3), np.uint8), camera)
    assert not small.any()                                   # too small to annotate


def test_element_overlay_shows_even_when_few():
    p = ring()
    base = render_points(p, size=ANNOTATED, camera=CAM)
    m = 200
    el = ring(m, seed=1)
    with_el = render_points(p, size=ANNOTATED, camera=CAM, elements=el,
                            element_values=np.linspace(0.5, 1, m))
    changed = (with_el != base).any(axis=2)
    assert changed.sum() > 3 * m                        # more than a pixel per element
    # a colour apart from the tracers': blue above red where the elements are drawn
    # strongly (their own layer, alone on black, at more than half its brightness)
    alone = render_points(np.zeros((0, 3)), size=ANNOTATED, camera=CAM, elements=el,
                          element_values=np.linspace(0.5, 1, m))
    on = with_el[alone.max(axis=2) > 128].astype(int)
    assert len(on) > m
    assert np.median(on[:, 2] - on[:, 0]) > 50
    lone = render_points(np.zeros((0, 3)), size=ANNOTATED, camera=CAM, elements=el[:5],
                         element_values=np.ones(5))
    assert (lone.max(axis=2) > LIT).sum() >= 5 * 9       # five dots of 3x3 pixels or more


def test_frames_of_one_call_share_camera_size_and_exposure(tiny_run, tmp_path, monkeypatch):
    calls = []
    real = render_mod.render_points

    def spy(points, **kw):
        calls.append(kw)
        return real(points, **kw)

    monkeypatch.setattr(render_mod, "render_points", spy)
    frames = tmp_path / "frames"
    assert _render(["render", str(tiny_run), "--out", str(frames), "--size", "320x200",
                    "--elements", "-q"]) == 0
    drawn = [kw for kw in calls if kw["annotate"]]
    pngs = sorted(os.listdir(frames))
    snaps = sorted(glob.glob(str(tiny_run / "snapshot_*.nc")))
    assert len(drawn) == len(pngs) == len(snaps) > 2
    for key in ("camera", "size", "exposure", "element_exposure"):
        assert all(kw[key] == drawn[0][key] for kw in drawn), key
    # the camera fitted once, to the first and the last snapshot together
    first, last = (read_frame(p, elements=True) for p in (snaps[0], snaps[-1]))
    assert drawn[0]["camera"] == Camera(azimuth=-90, elevation=15).fit(
        first.tracers, first.elements, last.tracers, last.elements, size=(320, 200))
    assert drawn[0]["exposure"] is not None and drawn[0]["element_exposure"] is not None
    assert sorted({kw["time"] for kw in drawn}) == [kw["time"] for kw in drawn]
    from PIL import Image
    for f in pngs:
        with Image.open(frames / f) as im:
            assert im.size == (320, 200)


def test_render_command_annotates_with_the_runs_time_and_units(tiny_run, tmp_path):
    newest = max(glob.glob(str(tiny_run / "snapshot_*.nc")))
    frame = read_frame(newest, elements=True)
    assert frame.units == ("L", "T") and frame.t > 0
    assert frame.elements.shape[1] == 3 and frame.strength.shape == frame.elements.shape[:1]
    from PIL import Image
    out = {}
    for flag in ("", "--no-annotate"):
        png = tmp_path / f"last{flag}.png"
        assert _render(["render", str(tiny_run), "--out", str(png), "--size", "480x270"]
                       + ([flag] if flag else [])) == 0
        with Image.open(png) as im:
            out[flag] = np.asarray(im.convert("RGB"))
    changed = (out[""] != out["--no-annotate"]).any(axis=2)
    region = _regions(changed.shape)
    assert changed[region["stamp"]].sum() > 50 and changed[region["scale"]].sum() > 50
    assert not changed[region["middle"]].any()
    assert lit_fraction(out["--no-annotate"]) > 0.02


@pytest.mark.gpu
def test_cupy_matches_numpy():
    import cupy as cp
    p = ring(200000)
    el = ring(500, seed=1)
    ev = np.linspace(0, 1, 500)
    a = render_points(p, size=(320, 180), elements=el, element_values=ev)
    b = render_points(cp.asarray(p), size=(320, 180), elements=cp.asarray(el),
                      element_values=cp.asarray(ev))
    assert isinstance(b, np.ndarray) and b.shape == a.shape
    diff = np.abs(a.astype(int) - b.astype(int))
    assert diff.max() <= 1 or (diff.max(axis=2) > 1).mean() < 1e-3


def test_weak_elements_are_fainter_than_strong_ones():
    """The elements' opacity follows their |α|-weighted density: of two equal element
    rings on black, one 100 times weaker, the weak ring's pixels are far darker (a
    remeshed lattice's weak nodes do not hide the cores)."""
    m = 400
    a = ring(m, seed=1)
    b = a + np.array([0.0, 0.0, 1.0])                      # the same ring, 1 L higher
    both = np.vstack([a, b])
    image = render_points(np.zeros((0, 3)), size=(320, 320), camera=CAM, elements=both,
                          element_values=np.r_[np.ones(m), np.full(m, 0.01)])
    bright = image.max(axis=2).astype(int)
    rows = np.arange(320)[:, None]
    upper, lower = bright * (rows < 160), bright * (rows >= 160)   # z up: b above a
    assert upper.max() > 0 and lower.max() > 0
    assert np.percentile(upper[upper > 0], 90) < 0.3 * np.percentile(lower[lower > 0], 90)
