"""The demo's explanation of its gap to Saffman's formula holds: the gap between the
elements' mean axial velocity and the thin-ring speed does not shrink with resolution."""
import re

import pytest

from vortexsim.cli.demo import main


def _gap(capsys, n, sigma):
    assert main(["--n", str(n), "--sigma", str(sigma), "--device", "cpu"]) == 0
    return float(re.search(r"gap = ([0-9.]+)", capsys.readouterr().out).group(1))


def test_the_gap_to_saffman_is_a_constant_not_a_discretisation_error(capsys):
    coarse, fine = _gap(capsys, 2000, 0.1), _gap(capsys, 4000, 0.05)
    assert coarse == pytest.approx(0.01236, abs=5e-5)      # the value the demo quotes
    assert fine == pytest.approx(coarse, rel=0.02)          # halving sigma leaves it
