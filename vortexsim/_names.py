"""The "did you mean" hint of vortexsim's errors about unknown names."""
from __future__ import annotations

import difflib

__all__ = ["did_you_mean"]


def did_you_mean(name, known, *, parenthetical=False):
    """The closest of ``known`` to ``name`` as a hint, or ``""`` when none is close.

    `` Did you mean 'x'?`` (a sentence after a message), or with ``parenthetical``
    `` (did you mean 'x'?)`` (after a name in a list).
    """
    close = difflib.get_close_matches(str(name), list(known), n=1)
    if not close:
        return ""
    return f" (did you mean {close[0]!r}?)" if parenthetical else f" Did you mean {close[0]!r}?"
