"""The "did you mean" hint of vortexsim's errors about unknown names, and the check of a
name among choices."""
from __future__ import annotations

import difflib

__all__ = ["did_you_mean", "choice"]


def did_you_mean(name, known, *, parenthetical=False):
    """The closest of ``known`` to ``name`` as a hint, or ``""`` when none is close.

    `` Did you mean 'x'?`` (a sentence after a message), or with ``parenthetical``
    `` (did you mean 'x'?)`` (after a name in a list).
    """
    close = difflib.get_close_matches(str(name), list(known), n=1)
    if not close:
        return ""
    return f" (did you mean {close[0]!r}?)" if parenthetical else f" Did you mean {close[0]!r}?"


def choice(what, value, choices):
    """``value`` if it is one of ``choices``, else a ValueError naming the closest."""
    if value in choices:
        return value
    raise ValueError(f"Unknown {what} {value!r}; expected one of {list(choices)}."
                     f"{did_you_mean(value, choices)}")
