"""``python -m vortexsim``: the ``vortexsim`` command (:mod:`vortexsim.cli`)."""
import sys

from .cli import main

sys.exit(main())
