"""Decaying isotropic turbulence: a vortexsim run against a spectral_ns.py run from the same
initial field, side by side (:mod:`vortexsim.validation.compare_isotropic`, whose
docstring describes the inputs and what is printed)::

    vortexsim run isotropic_turbulence --preset gpu --out runs/hit128
    python benchmarks/validation/spectral_ns.py --init runs/hit128/initial_field.nc \\
        --nu 0.0056 --t-end 2 --dt 0.01 --every 5 --spectrum-times 0,1,2 --statistics \\
        --device gpu --nc hit128_spectral.nc
    python benchmarks/validation/compare_isotropic.py runs/hit128 hit128_spectral.nc \\
        --spectrum-times 1,2 --png hit128_spectra.png

Exit codes: 0; 2 a missing file or variable, no common time (one line).
"""
import importlib.util
import os
import sys

if importlib.util.find_spec("vortexsim") is None:      # a checkout without pip install
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))

from vortexsim.validation.compare_isotropic import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
