"""``vortexsim cases``: per case the default size and the measured CPU time of its default
run, and per preset its settings and size (``vortexsim/cli/info.py``; the times from
``vortexsim.cli.resources.CASE_CPU_SECONDS``)."""
import re

import pytest

import vortexsim
from vortexsim.cli.command import main
from vortexsim.cli.common import case_file
from vortexsim.cli.resources import CASE_CPU_SECONDS


def _listing(capsys):
    """{case: [its lines]} of ``vortexsim cases``."""
    assert main(["cases"]) == 0
    blocks, name = {}, None
    for line in capsys.readouterr().out.splitlines():
        if line and not line[0].isspace() and line.split()[0] in vortexsim.list_cases():
            name = line.split()[0]
            blocks[name] = []
        elif name and line.strip():
            blocks[name].append(line.strip())
    return blocks


def _count(text, what):
    """The number before ``what`` ("elements", "tracers") in ``text``; 0 for "no"."""
    m = re.search(rf"([\d,]+|no) {what}\b", text)
    assert m, (what, text)
    return 0 if m.group(1) == "no" else int(m.group(1).replace(",", ""))


def _built(case, values):
    """(elements, tracers) of the case built by its builder with ``values``."""
    from vortexsim.cases import get_case
    from vortexsim.config import load_case_file
    builder = get_case(case).builder
    params = {**load_case_file(case_file(case))[1], **values}
    params = {k: None if v == "auto" else v for k, v in params.items()
              if k in get_case(case).params()}
    setup = builder(**params)
    return len(setup.x), len(setup.tracers)


def test_each_case_shows_its_default_size_and_cpu_time(capsys):
    blocks = _listing(capsys)
    assert set(blocks) == set(vortexsim.list_cases())
    for case, lines in blocks.items():
        default = next(ln for ln in lines if ln.startswith("default:"))
        assert "elements" in default and "tracers" in default, default
        assert f"about {CASE_CPU_SECONDS[case]} s on 2 CPU cores" in default, default
        assert (_count(default, "elements"), _count(default, "tracers")) == \
            _built(case, {}), default


def test_each_preset_shows_its_size(capsys):
    """The preset's line, then its size: the ring cases' GPU presets as built (2^15
    elements, 2^20 tracers), the periodic ones' lattice (128³ elements)."""
    from vortexsim.config import load_presets
    blocks = _listing(capsys)
    for case, lines in blocks.items():
        presets = load_presets(case_file(case))
        assert presets, case
        for name, values in presets.items():
            at = next(i for i, ln in enumerate(lines) if ln.startswith(f"--preset {name}:"))
            size = lines[at + 1]
            assert size.startswith("size:") and "elements" in size, size
            elements, tracers = _count(size, "elements"), _count(size, "tracers")
            if "n_phi" in values:                      # the ring cases: built here cheaply
                assert (elements, tracers) == _built(case, values), size
                assert elements == 32766 and tracers == 1 << 20, size
                assert ("remeshing changes the count" in size) == ("remesh_every" in values)
            else:                                      # the periodic box: n³ elements
                assert elements == values["n"] ** 3 and tracers == 0, size
    assert "(+32,766 images)" in next(ln for ln in blocks["ring_ground"]
                                      if ln.startswith("size:"))


@pytest.mark.parametrize("case", sorted(CASE_CPU_SECONDS))
def test_the_cpu_times_are_those_the_case_files_quote(case):
    """One table holds the times that ``vortexsim cases`` prints; each case file's header
    quotes the same "N s on 2 CPU cores" for its default run."""
    assert set(CASE_CPU_SECONDS) == set(vortexsim.list_cases())
    with open(case_file(case), encoding="utf-8") as f:
        header = " ".join(line.lstrip("#").strip() for line in f
                          if line.startswith("#"))
    quoted = re.findall(r"(\d+(?:\.\d+)?) s on 2 CPU cores", header)
    assert quoted, f"{case}.toml quotes no 'N s on 2 CPU cores'"
    assert float(quoted[0]) == CASE_CPU_SECONDS[case], (case, quoted)
