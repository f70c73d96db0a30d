"""The pseudo-spectral Navier–Stokes reference solver of the periodic box
(:mod:`vortexsim.validation.spectral_ns`, whose docstring describes the method, the
options and the files)::

    python benchmarks/validation/spectral_ns.py --n 64 --nu 1/1600 --t-end 10 --cfl 0.5 \\
        --every 5 --spectrum-times 0,9,10 --device cpu --out tg1600_n64.json
    python benchmarks/validation/spectral_ns.py --init RUN/initial_field.nc --nu 0.0056 \\
        --t-end 2 --dt 0.01 --every 5 --spectrum-times 0,1,2 --statistics --device gpu \\
        --nc hit128_spectral.nc

The JSON summary goes to ``--out``, default ``benchmarks/results/spectral_ns_DATE[_LABEL].json``.
"""
import importlib.util
import os
import sys

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if importlib.util.find_spec("vortexsim") is None:      # a checkout without pip install
    sys.path.insert(0, os.path.dirname(BENCHMARKS))

from vortexsim.validation.spectral_ns import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(results_dir=os.path.join(BENCHMARKS, "results")))
