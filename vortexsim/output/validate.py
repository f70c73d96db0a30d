r"""Checks of values read from files, before they are used.

A netCDF file is input like any other: its attributes may be of any type (text, numbers,
arrays), its variables of any dtype and shape, its JSON of any structure and nesting, its
text may hold terminal escape sequences.  The readers (:func:`vortexsim.output.
read_snapshot`) turn each value into the Python value they need through these helpers,
which raise :class:`InvalidValue` (a ``ValueError``) with a one-line description of what
was found and what was expected; the reader adds the path and the advice.

* :func:`scalar` (an attribute as a Python scalar), :func:`integer`, :func:`number`,
  :func:`text`, :func:`json_object` (strict JSON: finite numbers, bounded nesting),
  :func:`array` (dtype kind, shape, finite, positive)
* :func:`show` (a value in a message: short, escaped), :func:`printable` (text from a file
  for a terminal: control characters escaped)
"""
from __future__ import annotations

import json
import math

import numpy as np

__all__ = ["InvalidValue", "scalar", "integer", "number", "text", "json_object", "array",
           "show", "printable", "MAX_JSON_DEPTH"]

#: deepest nesting of lists and objects accepted in stored JSON (a config nests 3 deep)
MAX_JSON_DEPTH = 32


class InvalidValue(ValueError):
    """A value read from a file has the wrong type, shape or range (one-line message)."""


def show(value, limit=60):
    """``repr`` of a value read from a file for an error message: control characters
    escaped, at most ``limit`` characters."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        s = repr(value.tolist()) if value.size <= 8 else \
            f"<{value.dtype} array of shape {value.shape}>"
    else:
        s = repr(value)
    s = printable(s)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def printable(value):
    """``str(value)`` with every character that a terminal would not print as itself
    (control characters such as ESC, other format and unassigned characters, line
    separators; Unicode categories C* and Z* except the space) written as a Python escape
    (``\x1b``, ``\u202e``), so that text from a file cannot move the cursor, recolour or
    clear the terminal, or reorder what follows."""
    s = str(value)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else _escape(c) for c in s)


def _kind(value):
    if isinstance(value, np.ndarray):
        return f"an array of {value.size} {value.dtype}"
    return f"of type {type(value).__name__}"


def _escape(c):
    code = ord(c)
    if c == "\t":
        return "\\t"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def scalar(name, value):
    """An attribute's value as a Python scalar (str, int, float): numpy scalars and
    one-element arrays unpacked; anything else (arrays, bytes, None) refused."""
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise InvalidValue(f"{name} is an array of shape {value.shape} ({show(value)}), "
                               "expected one value")
        value = value.reshape(()).item()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return value
    raise InvalidValue(f"{name} = {show(value)} ({_kind(value)}), expected a number or text")


def integer(name, value, minimum=None, maximum=None):
    """``value`` (an attribute or a decoded JSON value) as an int in [minimum, maximum];
    a whole float is accepted, a bool, text or fraction is not."""
    if not isinstance(value, bool) and isinstance(value, (np.generic, np.ndarray)):
        value = scalar(name, value)
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidValue(f"{name} = {show(value)}, expected an integer")
    if minimum is not None and value < minimum or maximum is not None and value > maximum:
        where = (f">= {minimum}" if maximum is None else f"<= {maximum}" if minimum is None
                 else f"in [{minimum}, {maximum}]")
        raise InvalidValue(f"{name} = {show(value)}, expected an integer {where}")
    return value


def number(name, value, positive=False, minimum=None):
    """``value`` as a finite float (> 0 with ``positive``, >= ``minimum``)."""
    if isinstance(value, (np.generic, np.ndarray)):
        value = scalar(name, value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidValue(f"{name} = {show(value)}, expected a number")
    value = float(value)
    if not math.isfinite(value):
        raise InvalidValue(f"{name} = {show(value)}, expected a finite number")
    if positive and not value > 0:
        raise InvalidValue(f"{name} = {show(value)}, expected a number > 0")
    if minimum is not None and not value >= minimum:
        raise InvalidValue(f"{name} = {show(value)}, expected a number >= {minimum:.17g}")
    return value


def text(name, value):
    """``value`` as a str (an attribute written as text)."""
    if isinstance(value, (np.generic, np.ndarray)) and np.size(value) == 1:
        value = np.asarray(value).reshape(()).item()
    if not isinstance(value, str):
        raise InvalidValue(f"{name} = {show(value)} ({_kind(value)}), expected text")
    return value


def _finite_float(token):
    value = float(token)
    if not math.isfinite(value):
        raise InvalidValue(f"the number {show(token)} does not fit a float64")
    return value


def _bad_constant(token):
    raise InvalidValue(f"{token} is not a number (only finite numbers are stored)")


def _depth(value, limit):
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            if d > limit:
                return False
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return True


def json_object(name, value, max_depth=MAX_JSON_DEPTH):
    """A JSON text (an attribute) decoded as a dict: strict JSON (no NaN, Infinity or
    numbers beyond float64), at most ``max_depth`` levels of nesting."""
    raw = text(name, value)
    try:
        decoded = json.loads(raw, parse_float=_finite_float, parse_constant=_bad_constant)
    except InvalidValue as exc:
        raise InvalidValue(f"{name}: {exc}") from None
    except RecursionError:
        raise InvalidValue(f"{name} nests deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise InvalidValue(f"{name} is not valid JSON ({printable(exc)[:80]})") from None
    if not _depth(decoded, max_depth):
        raise InvalidValue(f"{name} nests deeper than {max_depth} levels")
    if not isinstance(decoded, dict):
        kind = {list: "array", str: "string", bool: "boolean", int: "number",
                float: "number"}.get(type(decoded), "null")
        raise InvalidValue(f"{name} is a JSON {kind} ({show(decoded)}), expected a JSON "
                           "object {...}")
    return decoded


def array(name, values, shape, kinds, finite=False, positive=False, allow_nan=False):
    """Check a variable's values: dtype kind in ``kinds`` (``"f"`` float, ``"iu"``
    integer), ``shape``, and with ``finite`` every value finite (NaN allowed with
    ``allow_nan``), with ``positive`` every value > 0."""
    values = np.asarray(values)
    if values.dtype.kind not in kinds or values.dtype.kind == "f" and values.itemsize not in (4, 8):
        want = {"f": "float32 or float64", "iu": "integers"}.get(kinds, kinds)
        raise InvalidValue(f"{name} has dtype {values.dtype}, expected {want}")
    if tuple(values.shape) != tuple(shape):
        raise InvalidValue(f"{name} has shape {tuple(values.shape)}, expected {tuple(shape)}")
    if finite and values.dtype.kind == "f":
        bad = ~np.isfinite(values)
        if allow_nan:
            bad &= ~np.isnan(values)
        if bad.any():
            first = values.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]]
            raise InvalidValue(f"{name} holds {int(bad.sum())} non-finite value(s) "
                               f"(first: {show(first)})")
    if positive:
        with np.errstate(invalid="ignore"):
            bad = ~(values > 0)
        if allow_nan and values.dtype.kind == "f":
            bad &= ~np.isnan(values)
        if bad.any():
            first = values.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]]
            raise InvalidValue(f"{name} holds {int(bad.sum())} value(s) <= 0 "
                               f"(first: {show(first)}), expected > 0")
    return values
