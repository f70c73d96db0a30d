"""The run's components: callbacks (a function and its schedule) and the ordered dicts of
callbacks and output writers that a :class:`~vortexsim.simulation.Simulation` holds."""
from __future__ import annotations

from ..schedules import load_schedule_state, schedule_state

__all__ = ["Callback", "Components", "whole_number"]


class Callback:
    """A function and its schedule (Oceananigans' ``Callback``): ``func(sim)``, or
    ``func(sim, parameters)`` when ``parameters`` is given, after each step at which
    ``schedule(sim)`` is True; ``schedule=None``: after every step.

    Example::

        sim.callbacks["log"] = Callback(lambda s: print(s.t), TimeInterval(1.0))
    """

    def __init__(self, func, schedule=None, parameters=None):
        if not callable(func):
            raise TypeError(f"Callback needs a callable func(sim), got {type(func).__name__}.")
        if schedule is not None and not callable(schedule):
            raise TypeError(f"Callback schedule must be a schedule (callable schedule(sim) -> "
                            f"bool, vortexsim.schedules) or None, got {type(schedule).__name__}.")
        self.func, self.schedule, self.parameters = func, schedule, parameters

    def __call__(self, sim):
        if self.parameters is None:
            return self.func(sim)
        return self.func(sim, self.parameters)

    def state_dict(self):
        return schedule_state(self.schedule)

    def load_state_dict(self, state):
        load_schedule_state(self.schedule, state)
        return self

    def __repr__(self):
        name = getattr(self.func, "__name__", type(self.func).__name__)
        return f"Callback({name}, schedule={self.schedule!r})"


class Components(dict):
    """An ordered dict name → callback or output writer (:attr:`Simulation.callbacks`,
    :attr:`Simulation.output_writers`) that checks what it is given.

    Callbacks: a :class:`Callback` (or any callable with a ``schedule`` attribute) or a
    plain callable ``f(sim)``, stored as ``Callback(f)`` (after every step).  Output
    writers: objects with ``schedule`` and ``write(sim)``.  ``append(obj)`` adds under
    a generated name (``f.__name__`` or the class name, made unique).
    """

    def __init__(self, kind, items=()):
        super().__init__()
        self.kind = kind
        if isinstance(items, dict):
            self.update(items)
        else:
            for obj in items:
                self.append(obj)

    def _checked(self, obj):
        if self.kind == "callback":
            if not callable(obj):
                raise TypeError(f"a callback must be callable (f(sim) or a Callback), got "
                                f"{type(obj).__name__}.")
            return obj if hasattr(obj, "schedule") else Callback(obj)
        if not (callable(getattr(obj, "write", None)) and hasattr(obj, "schedule")):
            raise TypeError(f"an output writer needs write(sim) and a schedule attribute "
                            f"(e.g. vortexsim.output.writers), got {type(obj).__name__}.")
        return obj

    def __setitem__(self, name, obj):
        super().__setitem__(str(name), self._checked(obj))

    def update(self, *args, **kwargs):
        for name, obj in dict(*args, **kwargs).items():
            self[name] = obj

    def setdefault(self, name, obj=None):
        if name not in self:
            self[name] = obj
        return self[name]

    def append(self, obj, name=None):
        """Add ``obj`` under ``name`` (default: generated, unique); returns the name."""
        if name is None:
            base = getattr(obj, "__name__", None) or type(obj).__name__
            base = base.strip("<>") or self.kind
            name, k = base, 1
            while name in self:
                k += 1
                name = f"{base}_{k}"
        self[name] = obj
        return name


def whole_number(name, value):
    """``value`` as an int, or ValueError naming ``name`` unless an integer >= 0."""
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise ValueError(f"{name} must be an integer >= 0 or None, got {value!r}.")
    return int(value)
