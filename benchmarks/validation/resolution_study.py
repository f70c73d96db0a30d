"""Resolution study of the ring cases (leapfrog, collision, ring_ground at three
resolutions up to ``--preset gpu``, and each case's CPU default beside them;
:mod:`vortexsim.validation.resolution_study`, whose docstring gives the levels, the
quantities and the output)::

    PYTHONPATH=. python benchmarks/validation/resolution_study.py --device gpu --budget 420
    PYTHONPATH=. python benchmarks/validation/resolution_study.py --quick --device cpu \\
        --out /tmp/rs.json

``--out`` defaults to ``benchmarks/results/resolution_study.json``.
"""
import importlib.util
import os
import sys

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if importlib.util.find_spec("vortexsim") is None:      # a checkout without pip install
    sys.path.insert(0, os.path.dirname(BENCHMARKS))

from vortexsim.validation.resolution_study import main  # noqa: E402

if __name__ == "__main__":
    main(results_dir=os.path.join(BENCHMARKS, "results"))
