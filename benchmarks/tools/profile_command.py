"""A whole ``vortexsim`` command under cProfile: where its wall time goes, the set-up
(the case's build, its files) included, which the run's own time line leaves out.

    python benchmarks/tools/profile_command.py --out prof/run512 -- \\
        run isotropic_turbulence --preset gpu --device gpu --set n=512 --steps 1 \\
        --out /tmp/r512 -q

Writes ``OUT.prof`` (``pstats``) and ``OUT.txt``: the ``--top`` functions by cumulative
and by own time.  The command ends its process with ``os._exit`` after the atexit
functions (``vortexsim.cli.signals.finish``), so the profile is written by one of them
(``python -m cProfile -o`` writes nothing then).  GPU work is asynchronous: its time
lands on the calls that wait for it (a transfer to the host, a synchronisation).
"""
from __future__ import annotations

import argparse
import atexit
import cProfile
import io
import os
import pstats
import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        raise SystemExit("usage: profile_command.py [--out PATH] [--top N] -- COMMAND ...")
    split = argv.index("--")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="profile_command", help="path without extension")
    p.add_argument("--top", type=int, default=40, help="functions listed (default 40)")
    args = p.parse_args(argv[:split])
    command = argv[split + 1:]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    profile = cProfile.Profile()

    def write():
        profile.disable()
        profile.dump_stats(args.out + ".prof")
        text = io.StringIO()
        for key in ("cumulative", "tottime"):
            pstats.Stats(profile, stream=text).sort_stats(key).print_stats(args.top)
        with open(args.out + ".txt", "w") as fh:
            fh.write(text.getvalue())

    atexit.register(write)
    from vortexsim.cli import main as vortexsim_main
    profile.enable()
    code = vortexsim_main(command)
    sys.exit(code)


if __name__ == "__main__":
    main()
