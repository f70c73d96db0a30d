"""The periodic box's state split by x-slabs over the ranks of a run
(vortexsim.model.slab_partition), ranks played by threads (tests/thread_ranks.py), CPU only.

Each rank holds only its slab's rows while it steps; after ``assemble()`` every rank holds
the whole n³ state, the same bits on every rank, and that state is the one-rank run's to
1e-12: Taylor–Green and isotropic turbulence at their defaults (rk2, classical stretching,
remesh_project, viscous lattice) on 2 and 3 ranks (slabs of equal and unequal width), the
transpose scheme without viscosity, rk4, adaptive dt and no projection.  Runs that cannot be
split (tracers, PSE, the spectral sum) say why and keep the whole state.  The diagnostics
row on 2 ranks is the one-rank row; a checkpoint of 2 ranks continues on 1 rank and one of
1 rank on 3 ranks as the one-rank run; a failed step raises SimulationError on every rank
with the whole last good state; SlabPartition.combine joins the ranks' step stats."""
import copy
import os

import numpy as np
import pytest
from thread_ranks import on_ranks  # tests/thread_ranks.py

import vortexsim
from vortexsim.backend import to_host
from vortexsim.backend.spill import is_frozen
from vortexsim import SimulationError
from vortexsim.model.slab_partition import SlabPartition, partition_reason
from vortexsim.physics.terms import LatticeDiffusion, Stretching

#: the ranks' state is the one-rank state to 1e-12 of its largest value
TOLERANCE = 1e-12
#: a diagnostics value of the ranks is the one-rank value to 1e-10 (relative)
ROW_TOLERANCE = 1e-10
FIELDS = ("x", "alpha", "sigma", "volume")


def _case(comm=None, case="taylor_green", n=12, **overrides):
    overrides.setdefault("device", "cpu")
    return vortexsim.make_case(case, communicator=comm, n=n, progress=False, **overrides)


def _one_rank(case, n, steps, **overrides):
    sim = _case(None, case, n, **overrides)
    assert sim.model.partition is None and partition_reason(sim.model) == ""
    for _ in range(steps):
        sim.step()
    return sim


def _state(sim):
    """Host copies of the whole state's arrays, t and iteration."""
    el = sim.model.elements
    return ({f: to_host(getattr(el, f)) for f in FIELDS}, sim.t, sim.iteration)


def _relative(got, want):
    scale = np.abs(want).max()
    assert scale > 0
    return np.abs(got - want).max() / scale


def _same_bits(states):
    """Every rank's arrays are rank 0's, bit for bit, and t, iteration the same."""
    arrays0, t0, it0 = states[0]
    for arrays, t, it in states:
        assert (t, it) == (t0, it0)
        for f in FIELDS:
            assert arrays[f].dtype == arrays0[f].dtype and arrays[f].shape == arrays0[f].shape
            assert arrays[f].tobytes() == arrays0[f].tobytes(), f


def _matches(state, one, n, exact_t=True):
    """The assembled state is the one-rank state to TOLERANCE; iteration and t equal (t
    to TOLERANCE where dt is adaptive: the steps follow max ‖∇u‖, equal to round-off)."""
    arrays, t, iteration = state
    want, t1, it1 = _state(one)
    assert iteration == it1
    assert t == t1 if exact_t else abs(t - t1) <= TOLERANCE * t1
    for f in FIELDS:
        assert arrays[f].shape == want[f].shape == ((n ** 3, 3) if f in ("x", "alpha")
                                                    else (n ** 3,)), f
        assert _relative(arrays[f], want[f]) <= TOLERANCE, f


def _split_run(size, case, n, steps, **overrides):
    """``steps`` steps of the case on ``size`` thread ranks, with the checks of each rank's
    part; [(arrays, t, iteration)] of each rank after assemble()."""
    def work(comm):
        sim = _case(comm, case, n, **overrides)
        model = sim.model
        part = model.partition
        assert isinstance(part, SlabPartition) and partition_reason(model) is None
        assert part.n == n and sum(part.counts) == n ** 3 and len(part.counts) == size
        r0, r1 = part.rows
        assert r1 - r0 == part.counts[comm.rank] and r0 == sum(part.counts[:comm.rank])
        assert r0 % (n * n) == 0 and r1 - r0 >= 2 * n * n
        for _ in range(steps):
            sim.step()
            # this rank's slab alone while it steps: its rows of the lattice's nodes
            assert not model.assembled and len(model.elements) == r1 - r0
            assert model.config["n_elements"] == n ** 3
            h = model.domain.box / n
            rows = np.arange(r0, r1)
            nodes = np.stack([rows // (n * n), (rows // n) % n, rows % n], axis=1) * h
            assert np.abs(to_host(model.elements.x) - nodes).max() <= 1e-9 * h
        model.assemble()
        assert model.assembled and len(model.elements) == n ** 3
        assert model.config["n_elements"] == n ** 3
        return _state(sim)
    return on_ranks(size, work)


def _ranks_follow(size, work, want, n):
    """``work(comm)`` (its simulation) on ``size`` thread ranks: every rank's assembled
    state the same bits, and the one-rank run ``want``'s to TOLERANCE."""
    def run(comm):
        sim = work(comm)
        sim.model.assemble()
        return _state(sim)
    states = on_ranks(size, run)
    _same_bits(states)
    _matches(states[0], want, n)


# -- 1. the cases at their defaults on 2 and 3 ranks -------------------------------------
@pytest.mark.parametrize("case", ["taylor_green", "isotropic_turbulence"])
@pytest.mark.parametrize("size, n", [(2, 12), (3, 12), (3, 10)])
def test_a_case_split_by_slabs_follows_one_rank(case, size, n):
    """3 steps; (3, 10): slabs of 4, 3 and 3 planes."""
    one = _one_rank(case, n, 3)
    cfg = one.config
    assert (cfg["integrator"], cfg["stretching"], cfg["viscous"]) == \
        ("rk2", "classical", "lattice") and cfg["remesh_project"] and cfg["nu"] > 0
    states = _split_run(size, case, n, 3)
    _same_bits(states)
    _matches(states[0], one, n)


def test_the_terms_are_bound_to_the_ranks():
    """Within the partition's own stages classical stretching takes the whole lattice's
    mean (bind_ranks), lattice diffusion works on the slab (bind_slab) and the stages sum
    through the rank's own slab; outside them (an evaluation of the assembled state)
    they are one rank's again."""
    def work(comm):
        model = _case(comm, n=8).model
        terms, summation = model.rhs.terms, model.rhs.summation
        stretching = [t for t in terms if isinstance(t, Stretching)]
        diffusion = [t for t in terms if isinstance(t, LatticeDiffusion)]
        assert len(stretching) == len(diffusion) == 1
        assert stretching[0]._ranks is None and diffusion[0]._slab is None
        with model.partition.own_stages(model.rhs):
            assert model.rhs.summation is model.partition.stage_sum
            assert stretching[0].zero_sum and stretching[0]._ranks == (comm, 8 ** 3)
            assert diffusion[0]._slab is not None and diffusion[0]._slab[1] == comm.rank * 256
        assert model.rhs.summation is summation
        assert stretching[0]._ranks is None and diffusion[0]._slab is None
        return True
    assert on_ranks(2, work) == [True, True]


# -- 2. other schemes --------------------------------------------------------------------
@pytest.mark.parametrize("case, overrides, size", [
    ("taylor_green", {"stretching": "transpose", "nu": 0.0}, 2),
    ("taylor_green", {"integrator": "rk4"}, 3),
    # dt from the largest ‖∇u‖ of all ranks (their slabs' maxima differ)
    ("isotropic_turbulence", {"adaptive": True}, 2),
    ("taylor_green", {"remesh_project": False}, 2),
])
def test_other_schemes_split_by_slabs_follow_one_rank(case, overrides, size):
    n = 12
    one = _one_rank(case, n, 3, **overrides)
    for key, value in overrides.items():
        assert one.config[key] == value
    if overrides.get("nu") == 0.0:           # no viscous term at all
        assert not any(isinstance(t, LatticeDiffusion) for t in one.model.rhs.terms)
    states = _split_run(size, case, n, 3, **overrides)
    _same_bits(states)
    _matches(states[0], one, n, exact_t=not overrides.get("adaptive"))


# -- 3. runs that are not split --------------------------------------------------------
@pytest.mark.parametrize("overrides, reason", [
    ({"tracers": 5}, "tracers"),
    ({"viscous": "pse", "n": 14}, "viscous"),
    ({"method": "spectral"}, "particle-mesh"),
])
def test_a_run_that_cannot_be_split_says_why_and_keeps_the_whole_state(overrides, reason):
    overrides = {"n": 12, **overrides}
    n = overrides.pop("n")
    one = _one_rank("taylor_green", n, 1, **overrides)

    def work(comm):
        sim = _case(comm, n=n, **overrides)
        why = partition_reason(sim.model)
        assert isinstance(why, str) and reason in why
        assert sim.model.partition is None and sim.model.assembled
        sim.step()
        assert len(sim.model.elements) == n ** 3          # every rank the whole state
        return _state(sim)
    states = on_ranks(2, work)
    _same_bits(states)
    _matches(states[0], one, n)


@pytest.mark.parametrize("case", ["taylor_green", "isotropic_turbulence"])
def test_a_case_split_by_slabs_builds_only_each_ranks_slab(case, monkeypatch):
    """No rank builds the whole state (the whole turbulence field is never made): from
    the start each rank holds its slab's rows alone, x the nodes and α the one-rank
    state's rows to 1e-12; rank 0 alone holds the initial velocity for
    ``initial_field.nc``, the one-rank field to 1e-12."""
    n, size = 12, 3
    one = _case(None, case, n)
    want, field = _state(one)[0], one.case_files.get("initial_field.nc")
    import vortexsim.cases.isotropic_turbulence as it

    def whole_field(*args, **kwargs):
        raise AssertionError("a rank built the whole initial field")
    monkeypatch.setattr(it, "isotropic_turbulence_field", whole_field)

    def work(comm):
        sim = _case(comm, case, n)
        model = sim.model
        r0, r1 = model.partition.rows
        assert not model.assembled and len(model.elements) == r1 - r0
        got = {f: to_host(getattr(model.elements, f)) for f in FIELDS}
        assert got["x"].tobytes() == want["x"][r0:r1].tobytes()
        scale = np.abs(want["alpha"]).max()
        assert np.abs(got["alpha"] - want["alpha"][r0:r1]).max() <= TOLERANCE * scale
        return sim.case_files
    files = on_ranks(size, work)
    if field is None:
        assert files == [{}] * size
        return
    assert [sorted(f) for f in files] == [["initial_field.nc"]] + [[]] * (size - 1)
    u = files[0]["initial_field.nc"].u
    assert np.abs(u - field.u).max() <= TOLERANCE * np.abs(field.u).max()


def test_a_slab_given_to_a_run_that_cannot_split_is_refused(monkeypatch):
    """The elements of one rank's slab, where the model cannot split (PSE): a ValueError
    that says why, on every rank."""
    import vortexsim.model.slab_partition as sp
    monkeypatch.setattr(sp, "splits_by_slabs", lambda config, ranks: True)

    def work(comm):
        with pytest.raises(ValueError, match="cannot hold its state split by slabs: its "
                                             "viscous term"):
            _case(comm, n=14, viscous="pse")
        return True
    assert on_ranks(2, work) == [True, True]


def test_one_rank_has_nothing_to_split():
    model = _case(n=8).model
    assert partition_reason(model) == "" and model.partition is None and model.assembled


# -- 4. the diagnostics ------------------------------------------------------------------
@pytest.mark.parametrize("case, size", [("taylor_green", 2), ("isotropic_turbulence", 3)])
def test_the_diagnostics_row_of_the_ranks_is_the_one_rank_row(case, size):
    """The row computed on the slabs (no whole state assembled): every value to 1e-10
    relative; those that are zero up to round-off (Σα, the impulses, the helicity) to
    1e-10 of their natural scale (Σ|α| L^p, √(E Ω))."""
    n = 12
    one = _one_rank(case, n, 2)
    want = one.diagnostics()
    total = np.abs(np.asarray(one.model.elements.alpha)).sum()
    box = one.model.domain.box
    scales = {"total_vorticity": total, "linear_impulse": box * total,
              "angular_impulse": box ** 2 * total,
              "helicity": np.sqrt(want["energy"] * want["enstrophy"])}

    def work(comm):
        sim = _case(comm, case, n=n)
        for _ in range(2):
            sim.step()
        assert not sim.model.assembled
        row = sim.diagnostics()                    # collective, on the slabs
        assert not sim.model.assembled
        return row
    rows = on_ranks(size, work)
    floats = [k for k, v in want.items()
              if np.asarray(v).dtype.kind == "f" and np.asarray(v).size]
    assert {"energy", "enstrophy", "mean_energy", "dissipation", "lattice_energy",
            "lattice_dissipation", "particle_energy", "skewness"} <= set(floats)
    for row in rows:
        assert set(row) == set(want)
        assert (row["t"], row["iteration"]) == (want["t"], want["iteration"])
        for key in floats:
            got, ref = np.asarray(row[key], dtype=float), np.asarray(want[key], dtype=float)
            assert got.shape == ref.shape, key
            scale = max(np.abs(ref).max(), scales.get(key, 0.0))
            assert scale > 0 and np.abs(got - ref).max() <= ROW_TOLERANCE * scale, key
            # the same bits on every rank
            assert got.tobytes() == np.asarray(rows[0][key], dtype=float).tobytes(), key


# -- 5. restarts across rank counts -----------------------------------------------------
def test_a_checkpoint_of_two_ranks_continues_on_one_rank():
    n = 12
    want = _one_rank("taylor_green", n, 4)

    def work(comm):
        sim = _case(comm, n=n)
        sim.run(steps=2)
        return sim.checkpoint_state()             # collective
    checkpoints = on_ranks(2, work)
    for cp in checkpoints:
        assert cp["state"]["iteration"] == 2
        assert np.shape(cp["state"]["elements"]["alpha"]) == (n ** 3, 3)
        assert np.array_equal(cp["state"]["elements"]["alpha"],
                              checkpoints[0]["state"]["elements"]["alpha"])
    sim = _case(n=n)
    sim.pickup(copy.deepcopy(checkpoints[0]))
    assert sim.iteration == 2 and sim.model.partition is None
    sim.run(steps=2)
    _matches(_state(sim), want, n)


@pytest.mark.parametrize("n", [12, 10])
def test_a_checkpoint_of_one_rank_continues_on_three_ranks(n):
    want = _one_rank("taylor_green", n, 4)
    one = _case(n=n)
    one.run(steps=2)
    checkpoint = one.checkpoint_state()

    def work(comm):
        sim = _case(comm, n=n)
        sim.pickup(copy.deepcopy(checkpoint))
        r0, r1 = sim.model.partition.rows
        assert sim.iteration == 2 and sim.model.config["n_elements"] == n ** 3
        sim.step()
        assert len(sim.model.elements) == r1 - r0    # the rows of the state read
        sim.run(steps=1)
        # no writer needs the whole state: the run ends with each rank's slab
        assert sim.iteration == 4 and not sim.model.assembled
        return sim
    _ranks_follow(3, work, want, n)


def test_a_state_without_element_sets_is_loaded_whole_on_split_ranks():
    """A state of snapshot formats 1 and 2 (no volumes, labels or groups) on 2 ranks: the
    case is built whole for it (not by slabs), the state loaded, each rank then steps
    its slab; the one-rank run to 1e-12."""
    n = 8
    want = _one_rank("taylor_green", n, 3)
    state = _one_rank("taylor_green", n, 2).model.whole_state_dict()
    for key in ("volume", "group"):
        del state["elements"][key]
    del state["groups"]

    def work(comm):
        sim = _case(comm, n=n, state=copy.deepcopy(state))
        sim.model.load_state_dict(copy.deepcopy(state))
        sim.step()
        assert sim.iteration == 3 and not sim.model.assembled
        return sim
    _ranks_follow(2, work, want, n)


def test_a_whole_state_loads_while_rank_zero_holds_the_assembled_state():
    """After the whole state went to rank 0's host (a snapshot's), loading a whole state
    (a pickup) takes every rank through the same collectives: no rank waits."""
    n = 8
    want = _one_rank("taylor_green", n, 2)
    checkpoint = want.model.whole_state_dict()

    def work(comm):
        sim = _case(comm, n=n)
        sim.model.assemble_on_root()
        sim.model.load_state_dict(copy.deepcopy(checkpoint))
        return sim
    _ranks_follow(2, work, want, n)


# -- 6. a failed step ----------------------------------------------------------------------
def test_a_failed_step_raises_on_every_rank_with_the_whole_last_good_state():
    n = 12
    initial = _case(n=n, max_speed=1e-6)
    want = {f: np.array(getattr(initial.model.elements, f)) for f in FIELDS}

    def work(comm):
        sim = _case(comm, n=n, max_speed=1e-6)
        assert sim.model.partition is not None
        with pytest.raises(SimulationError, match="max_speed") as info:
            sim.step()
        err = info.value
        assert (err.step, err.t) == (1, 0.0) and sim.iteration == 0 and sim.t == 0.0
        return err.state
    states = on_ranks(2, work)
    h = initial.model.domain.box / n
    for state in states:
        assert (state["iteration"], state["t"]) == (0, 0.0)
        el = state["elements"]
        assert np.shape(el["alpha"]) == (n ** 3, 3)
        assert np.array_equal(el["alpha"], want["alpha"])    # gathered, not recomputed
        assert np.abs(el["x"] - want["x"]).max() <= 1e-12 * h
        assert np.allclose(el["sigma"], want["sigma"], rtol=1e-14, atol=0)
        assert np.allclose(el["volume"], want["volume"], rtol=1e-14, atol=0)
        assert el["alpha"].tobytes() == states[0]["elements"]["alpha"].tobytes()


# -- 7. SlabPartition.combine -----------------------------------------------------------
class _Gathered:
    """A communicator whose allgather returns the given parts, this rank's replaced by
    what it passes."""

    def __init__(self, parts, rank=0):
        self.parts, self.rank, self.size = parts, rank, len(parts)

    def allgather(self, obj):
        out = list(self.parts)
        out[self.rank] = obj
        return out


def _combine(parts, rank=0):
    part = SlabPartition.__new__(SlabPartition)        # combine needs the communicator
    part.communicator = _Gathered(parts, rank)
    return part.combine(parts[rank])


def _stats(finite, speed2, grad2, lo, hi):
    return np.array([finite, speed2, grad2, *lo, *hi], dtype=np.float64)


def test_combine_takes_all_finite_the_largest_maxima_and_the_box_of_all():
    parts = [_stats(1, 4.0, 9.0, (0.0, 1.0, 2.0), (3.0, 5.0, 5.0)),
             _stats(1, 6.0, 2.0, (-1.0, 2.0, 0.5), (2.0, 6.0, 4.0)),
             _stats(1, 5.0, 3.0, (0.5, 0.0, 3.0), (7.0, 1.0, 4.5))]
    want = [1.0, 6.0, 9.0, -1.0, 0.0, 0.5, 7.0, 6.0, 5.0]
    for rank in range(3):
        assert _combine(parts, rank).tolist() == want
    parts[2][0] = 0.0                                    # one rank's state not finite
    assert _combine(parts)[0] == 0.0 and _combine(parts, 2)[0] == 0.0
    assert _combine(parts)[1:].tolist() == want[1:]


@pytest.mark.parametrize("which", [1, 2])
def test_combine_passes_a_nan_maximum_of_one_rank_on(which):
    parts = [_stats(1, 4.0, 9.0, (0.0,) * 3, (1.0,) * 3) for _ in range(3)]
    parts[1][which] = np.nan
    for rank in range(3):
        out = _combine(parts, rank)
        assert np.isnan(out[which]) and not np.isfinite(out[1:3]).all()
        assert np.isfinite(out[3 - which])


def test_combine_on_thread_ranks_gives_every_rank_the_same_stats():
    def work(comm):
        part = SlabPartition.__new__(SlabPartition)
        part.communicator = comm
        r = comm.rank
        return part.combine([1.0, float(r), 10.0 - r, -r, 0, 0, r, 1, 1])
    out = on_ranks(3, work)
    for got in out:
        assert got.tolist() == [1.0, 2.0, 10.0, -2.0, 0.0, 0.0, 2.0, 1.0, 1.0]


def test_combine_keeps_the_box_of_the_ranks_that_have_one():
    """A rank without elements contributes its finite flag and maxima alone (3 numbers);
    the box is that of the others, wherever that rank is."""
    full = _stats(1, 4.0, 1.0, (0.0, 1.0, 2.0), (3.0, 4.0, 5.0))
    empty = np.array([1.0, 9.0, 0.5])
    assert _combine([full, empty]).tolist() == [1.0, 9.0, 1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_combine_keeps_the_box_when_rank_zero_has_none():
    full = _stats(1, 4.0, 1.0, (0.0, 1.0, 2.0), (3.0, 4.0, 5.0))
    empty = np.array([1.0, 9.0, 0.5])
    assert _combine([empty, full], 1).tolist() == \
        [1.0, 9.0, 1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


# -- evaluations and new sets of a split model ---------------------------------------------
def _random_strengths_state(n):
    """A one-rank TG state with random zero-sum strengths on the lattice: its classical
    stretching rate has a mean far above round-off (the cases' projected fields do not)."""
    state = _case(n=n).model.state_dict()
    alpha = 1e-2 * np.random.default_rng(7).standard_normal((n ** 3, 3))
    state["elements"]["alpha"] = alpha - alpha.mean(axis=0)
    return state


def test_the_rates_of_a_split_model_are_the_one_rank_rates():
    n = 12
    state = _random_strengths_state(n)
    one = _case(n=n)
    one.pickup(copy.deepcopy(state))
    want = np.asarray(one.rates()[1])

    def work(comm):
        sim = _case(comm, n=n)
        sim.pickup(copy.deepcopy(state))
        return np.asarray(sim.rates()[1])
    got = on_ranks(2, work)[0]
    assert _relative(got, want) <= TOLERANCE


def test_replaced_elements_of_a_split_model_are_stepped():
    n = 12

    def change_and_step(sim):
        sim.step()
        sim.model.assemble()
        el = sim.model.elements
        sim.model.replace_elements(np.array(el.x), 0.5 * np.array(el.alpha),
                                   np.array(el.sigma), np.array(el.volume))
        sim.step()
        sim.model.assemble()
        return _state(sim)
    want = _case(n=n)
    change_and_step(want)
    states = on_ranks(2, lambda comm: change_and_step(_case(comm, n=n)))
    _matches(states[0], want, n)


@pytest.mark.gpu
@pytest.mark.parametrize("case, n", [("taylor_green", 12), ("isotropic_turbulence", 9)])
def test_a_case_split_by_slabs_on_cupy_follows_one_rank(case, n):
    """The split step on CuPy arrays (2 thread ranks on one GPU; n = 9: slabs of 5 and 4
    planes, odd counts of float64 per component): 3 steps match one rank."""
    one = _one_rank(case, n, 3, device="gpu")
    states = _split_run(2, case, n, 3, device="gpu")
    _same_bits(states)
    _matches(states[0], one, n)


def test_the_whole_state_stays_in_memory_where_its_files_cannot_be_made(monkeypatch,
                                                                          tmp_path):
    """A spill that fails on rank 0 (a full disk: OSError) leaves the state in memory,
    the same bits, and the other ranks are not left waiting."""
    from vortexsim.backend import spill as spill_module
    from vortexsim.model import slab_partition

    def full(*_):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(spill_module, "SPILL_FRACTION", 0.0)
    monkeypatch.setattr(slab_partition, "spill_array", full)
    n = 12

    def work(comm):
        sim = _case(comm, n=n)
        sim.run(steps=1)
        sim.model.assemble_on_root(str(tmp_path))
        root = None
        if comm.rank == 0:
            assert not isinstance(sim.model.elements.alpha.base, np.memmap)
            root = np.array(sim.model.elements.alpha)
        sim.model.assemble()
        return root, np.array(to_host(sim.model.elements.alpha))
    out = on_ranks(2, work)
    assert out[0][0].tobytes() == out[0][1].tobytes()


@pytest.mark.parametrize("spill", [False, True])
def test_the_whole_state_on_rank_zero_alone_is_the_assembled_state(monkeypatch, tmp_path,
                                                                   spill):
    """assemble_on_root (what snapshots and the plot use): on rank 0 the whole state on
    the host, bit for bit the state that assemble() gathers on every rank, sent in
    messages of at most ROOT_CHUNK_ROWS rows (made small here: several rounds, a last
    partial one); the other ranks keep their slabs.  A later assemble() gathers it on
    every rank.  With a spill directory (the snapshot writer's run directory) and a state
    larger than the spill threshold (made 0 here) rank 0's arrays are read-only memory maps of files already unlinked (none left there), which
    a state_dict() hands on without a copy."""
    from vortexsim.backend import spill as spill_module
    from vortexsim.model import slab_partition
    monkeypatch.setattr(slab_partition, "ROOT_CHUNK_ROWS", 100)   # 576 rows a rank: 6
    monkeypatch.setattr(spill_module, "SPILL_FRACTION", 0.0)      # any state to files
    n = 12

    def work(comm):
        sim = _case(comm, n=n)
        sim.run(steps=2)
        model = sim.model
        own = len(model.elements)
        model.assemble_on_root(str(tmp_path) if spill else None)
        if comm.rank == 0:
            assert model.assembled and isinstance(model.elements.alpha, np.ndarray)
            root = {f: np.array(getattr(model.elements, f)) for f in FIELDS}
            for f in FIELDS:
                a = getattr(model.elements, f)
                assert isinstance(a.base, np.memmap) == spill and is_frozen(a), f
            assert sim.model.state_dict()["elements"]["alpha"] is model.elements.alpha
            assert os.listdir(tmp_path) == []
        else:
            assert not model.assembled and len(model.elements) == own
            root = None
        model.assemble()                          # everywhere now
        assert model.assembled and len(model.elements) == n ** 3
        return root, _state(sim)
    out = on_ranks(3, work)
    _same_bits([state for _, state in out])
    root, (whole, _, _) = out[0]
    for f in FIELDS:
        assert root[f].dtype == whole[f].dtype and root[f].tobytes() == whole[f].tobytes(), f
