"""Every command's --help (the top-level help names ``vortexsim run --help`` as its
example) prints its usage and exits 0."""
import argparse
import contextlib
import io

import pytest

from vortexsim.cli import main
from vortexsim.cli.command import build_parser


def _commands():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


def test_the_commands_are_found():
    assert {"run", "restart", "cases", "info", "render"} <= set(_commands())


@pytest.mark.parametrize("command", [[]] + [[c] for c in _commands()])
def test_help_prints_usage_and_exits_0(command):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*command, "--help"]) == 0
    text = out.getvalue()
    assert text.startswith("usage: vortexsim") and (not command or command[0] in text)
    if not command:
        assert "e.g. vortexsim run --help" in text       # the example it shows runs above
