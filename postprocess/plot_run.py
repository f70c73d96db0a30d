#!/usr/bin/env python
"""Plot a vortexsim run directory again (or one written without matplotlib).

    python postprocess/plot_run.py runs/leapfrog [OUT.png]

Writes ring centres and radii against time (diagnostics.nc) and the x–z view of the newest
snapshot, as ``vortexsim run`` does at the end of a run.  Needs matplotlib.
"""
import argparse
import logging
import sys

from vortexsim.output.plot import plot_run


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a run directory (diagnostics.nc, snapshot_*.nc)")
    p.add_argument("out", nargs="?", help="image file (default: RUN_DIR/plot.png)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    path = plot_run(args.run_dir, args.out)
    return 0 if path else 1


if __name__ == "__main__":
    sys.exit(main())
