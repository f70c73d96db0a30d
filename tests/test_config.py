"""Case files and parameter validation (vortexsim/config.py, cases/*.toml)."""
from __future__ import annotations

import math
import os

import pytest

import vortexsim
from vortexsim.cases import case_defaults
from vortexsim.cli import case_file, case_files_dir
from vortexsim.config import (CLI_ONLY, OUTPUT_DEFAULTS, PARAMETERS, ConfigError, check_params,
                              load_case_file, parse_assignments, to_toml)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = sorted(vortexsim.list_cases())


def _defaults(case):
    return {**{k: v for k, v in case_defaults(case).items() if k not in CLI_ONLY},
            **OUTPUT_DEFAULTS}


@pytest.mark.parametrize("case", CASES)
def test_case_file_names_every_parameter_with_the_library_defaults(case):
    """Each shipped case file sets every parameter (commented with units) to the value
    make_case uses, so the file and the library cannot drift apart."""
    path = os.path.join(REPO, "cases", f"{case}.toml")
    assert os.path.isfile(path)
    name, params = load_case_file(path)
    assert name == case
    defaults = _defaults(case)
    checked = check_params(params, defaults)
    missing = set(defaults) - set(checked)
    assert not missing, f"{path} does not name {sorted(missing)}"
    for key, default in case_defaults(case).items():
        if key in CLI_ONLY:
            continue
        assert checked[key] == default, (key, checked[key], default)
    assert checked["snapshot_interval"] > 0 and checked["diagnostics_interval"] > 0
    text = open(path, encoding="utf-8").read()
    for key in checked:  # every line with a key carries a comment (units / meaning)
        line = next(l for l in text.splitlines() if l.startswith(f"{key} "))
        assert "#" in line, line
    if "n_phi" in defaults:                       # a ring case: the GPU-size settings
        assert "2^15" in text and "2^20" in text


def test_case_files_are_found_as_package_data():
    """The CLI's case directory (vortexsim/case_files, a link to cases/) holds the files."""
    for case in CASES:
        path = case_file(case)
        assert path is not None
        assert open(path, "rb").read() == open(os.path.join(REPO, "cases", f"{case}.toml"),
                                                "rb").read()
    assert os.path.samefile(case_files_dir(), os.path.join(REPO, "cases"))


def test_tables_only_group_keys_and_duplicates_are_refused(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('case = "single_ring"\nn_phi = 8\n[time]\ndt = 0.1\n')
    assert load_case_file(p) == ("single_ring", {"n_phi": 8, "dt": 0.1})
    p.write_text('case = "single_ring"\nn_phi = 8\n[discretization]\nn_phi = 9\n')
    with pytest.raises(ConfigError, match="set twice"):
        load_case_file(p)
    p.write_text('case = "single_ring"\n[timee]\ndt = 0.1\n')
    with pytest.raises(ConfigError, match="did you mean 'time'"):
        load_case_file(p)
    p.write_text('n_phi = 8\n')
    with pytest.raises(ConfigError, match="case"):
        load_case_file(p)
    p.write_text('case = "single_ring"\nn_phi = \n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_case_file(p)
    with pytest.raises(ConfigError, match="does not exist"):
        load_case_file(tmp_path / "missing.toml")


def test_parse_assignments():
    got = parse_assignments(["n_phi=16", "dt = 0.05", "kernel=algebraic", "adaptive=true",
                             "time.t_end=3", 'device="cpu"', "sigma=auto"])
    assert got == {"n_phi": 16, "dt": 0.05, "kernel": "algebraic", "adaptive": True,
                   "t_end": 3, "device": "cpu", "sigma": "auto"}
    assert isinstance(got["n_phi"], int) and isinstance(got["dt"], float)
    for bad in ("n_phi", "=3", "bogus.n_phi=3"):
        with pytest.raises(ConfigError):
            parse_assignments([bad])


@pytest.mark.parametrize("params, match", [
    ({"n_ph": 3}, "did you mean 'n_phi'"),
    ({"n_phi": 0}, "n_phi must be > 0"),
    ({"n_phi": 2.5}, "integer"),
    ({"n_phi": "8"}, "number"),
    ({"dt": 0.0}, "dt must be > 0"),
    ({"dt": -0.1}, "dt must be > 0"),
    ({"dt": "0.1 s"}, "bare number"),
    ({"dt": math.inf}, "finite"),
    ({"sigma": 0.0}, "sigma must be > 0"),
    ({"sigma": -1}, "sigma must be > 0"),
    ({"radius": True}, "number"),
    ({"circulation": 0}, "must not be 0"),
    ({"core": -0.1}, ">= 0"),
    ({"tracers_per_ring": -1}, ">= 0"),
    ({"adaptive": 1}, "true or false"),
    ({"kernel": 3}, "string"),
    ({"t_end": 0}, "t_end must be > 0"),
    ({"snapshot_interval": -1.0}, "> 0"),
    ({"case": "collision"}, "cannot be changed"),
    ({"progress": False}, "unknown key"),
])
def test_bad_values_are_refused_with_a_message(params, match):
    with pytest.raises(ConfigError, match=match):
        check_params(params, _defaults("leapfrog"))


def test_values_are_normalised():
    got = check_params({"n_phi": 16.0, "dt": 1, "sigma": "auto", "max_speed": 5,
                        "adaptive": True}, _defaults("leapfrog"))
    assert got == {"n_phi": 16, "dt": 1.0, "sigma": None, "max_speed": 5.0, "adaptive": True}
    assert type(got["n_phi"]) is int and type(got["dt"]) is float


def test_resolved_toml_round_trips_exactly(tmp_path):
    sim = vortexsim.make_case("oblique_collision", n_phi=6, layers=1, tracers_per_ring=4,
                              device="cpu", progress=False)
    params = {k: v for k, v in sim.config.items()
              if k not in ("case", "t0", "groups", "n_elements", "n_tracers", "progress")}
    params.update(snapshot_interval=0.1 + 0.2, diagnostics_interval=1 / 3, plot=False)
    text = to_toml("oblique_collision", params, header="a\nb", derived={"n_elements": 12})
    p = tmp_path / "c.toml"
    p.write_text(text)
    case, back = load_case_file(p)
    assert case == "oblique_collision"
    assert back == params  # floats bitwise (repr), ints, bools, strings
    for key in params:
        assert key in PARAMETERS


#: the run parameters' defaults as the model read them before the one table held them
EXPECTED_RUN_DEFAULTS = {
    "dt": None,                    # [T] step (dt_max with adaptive=True); required
    "t_end": None,                 # [T] default stop time of run()
    "integrator": "rk4",           # euler | rk2 | rk4
    "kernel": "gaussian",
    "method": "direct",            # direct | fmm | auto
    "tol": 1e-6,                   # FMM relative accuracy
    "precision": "float64",
    "device": "auto",              # auto | cpu | gpu
    "stretching": "transpose",     # transpose | classical
    "nu": 0.0,                     # [L²/T]
    "viscous": "core_spreading",   # core_spreading | pse (free space, periodic box)
    "pse_order": 2,                # order in ε of the PSE kernel: 2 | 4
    "boundary": "free",            # free | ground | periodic
    "ground_z": 0.0,               # [L] height of the ground plane
    "box": None,                   # [L] edge of the periodic box [0, L)³
    "remesh_every": 0,             # steps between two remeshings (0: never)
    "remesh_spacing": None,        # [L] lattice spacing h of the remeshing
    "remesh_overlap": None,        # σ = overlap × h after a remeshing (None: 1, or the case's)
    "remesh_threshold": 1e-6,      # free space: nodes with |α| ≤ this × max|α| dropped
    "remesh_project": False,       # periodic box: α made divergence-free after remeshing
    "adaptive": False,
    "courant": 0.1,                # C of the adaptive rule dt = C / max‖∇u‖
    "dt_min": None,                # [T] lower bound of the adaptive dt (default dt/1000)
    "max_speed": None,             # [L/T] blow-up bound on |u| (default 100 × max|u| at t0)
    "root_slack": 0.05,            # FMM root cube margin, fraction of the box width
    #                                (a wider cube makes wider leaves: at 0.25 the leapfrog
    #                                GPU case had 0.40 instead of 0.32 and 1.8× the pairs)
    "progress": True,              # progress bar in run()
}


def test_the_parameter_table_gives_the_run_defaults_of_the_model():
    """config.RUN_DEFAULTS (from the table) are the model's: keys, values, order."""
    from vortexsim import config, model
    assert model.RUN_DEFAULTS is config.RUN_DEFAULTS
    assert list(config.RUN_DEFAULTS) == list(EXPECTED_RUN_DEFAULTS)
    assert [repr(v) for v in config.RUN_DEFAULTS.values()] == \
        [repr(v) for v in EXPECTED_RUN_DEFAULTS.values()]
    table = config.PARAMETER_TABLE
    assert all(table[k].section is not None for k in PARAMETERS)
    assert config.CLI_ONLY == ("progress",) and table["progress"].section is None
    assert OUTPUT_DEFAULTS == {"snapshot_interval": None, "diagnostics_interval": None,
                               "plot": True}


def test_a_parameter_of_an_unknown_kind_is_refused():
    from vortexsim.config import Parameter
    with pytest.raises(ValueError, match="parameter 'x'"):
        Parameter("x", "physics", "L", "a length", kind="complex")
    with pytest.raises(ValueError, match="parameter 'y'"):
        Parameter("y", "nowhere", "L", "a length")


def test_docs_parameters_md_is_generated_from_the_table():
    from vortexsim.config import parameters_markdown
    with open(os.path.join(REPO, "docs", "parameters.md"), encoding="utf-8") as fh:
        text = fh.read()
    assert text == parameters_markdown(), (
        "docs/parameters.md is not the output of vortexsim.config.parameters_markdown(); "
        "regenerate it (the command is in the file)")
