"""The import contract of the package (``docs/architecture.md``, ``style.md``).

Layers, lowest first; a module may import from its own layer and the layers below it,
never from a layer above.  Every import counts, also those inside functions (a lazy
import is still a dependency).  Every module of the package must be placed in a layer, so
that a new module is placed on purpose.  The FMM's stage modules must not import each
other in a cycle.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "vortexsim"

#: (layer name, module prefixes), lowest first (``docs/architecture.md``)
LAYERS = (
    ("base", ("vortexsim._names", "vortexsim.backend", "vortexsim.config",
              "vortexsim.schedules", "vortexsim.state")),
    ("kernels", ("vortexsim.kernels",)),
    ("geometry", ("vortexsim.geometry",)),               # free space, ground, periodic box
    ("fmm", ("vortexsim.fmm",)),
    ("summation", ("vortexsim.summation",)),             # direct, FMM, spectral, lattice
    ("physics", ("vortexsim.physics",)),
    ("model", ("vortexsim.model",)),
    ("diagnostics", ("vortexsim.diagnostics",)),
    ("simulation", ("vortexsim.simulation",)),
    ("output", ("vortexsim.output",)),
    ("viz", ("vortexsim.viz",)),                         # pictures of run directories
    ("cases", ("vortexsim.cases",)),
    ("cli", ("vortexsim.cli", "vortexsim.__main__", "vortexsim",
             "vortexsim.viz.cli")),                    # the commands of those layers
    ("validation", ("vortexsim.validation",)),        # reference solver, validation studies
)

#: the most lines a module of the package may have
MAX_MODULE_LINES = 650
#: the most lines of the Simulation class (the run alone; the model is apart)
MAX_SIMULATION_LINES = 400


def _module_name(path):
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module):
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    return None if best is None else best[0]


def _package_of(module, path):
    """The package that relative imports of ``module`` (file ``path``) start from."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _from_target(node, package):
    """The absolute module named by ``from ... import`` statement ``node``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module, path, known):
    """(line, imported vortexsim module) for every import statement of ``path``."""
    package = _package_of(module, path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            root = _from_target(node, package)
            # `from pkg import sub` imports the module pkg.sub when it is one
            names = [f"{root}.{a.name}" if f"{root}.{a.name}" in known else root
                     for a in node.names]
        else:
            continue
        found += [(node.lineno, n) for n in names if n == "vortexsim" or
                  n.startswith("vortexsim.")]
    return found


def test_every_module_has_a_layer():
    unplaced = [m for m in _modules() if _layer(m) is None]
    assert not unplaced, f"modules without a layer in tests/test_architecture.py: {unplaced}"


def violations(modules=None):
    """'module:line imports target (layer a above layer b)' for every upward import."""
    modules = _modules() if modules is None else modules
    out = []
    for module, path in modules.items():
        own = _layer(module)
        for line, target in _imports(module, path, modules):
            # importing a package's own __init__ from inside it is the package itself
            if module.startswith(target + ".") and target != "vortexsim":
                continue
            theirs = _layer(target)
            if theirs is not None and own is not None and theirs > own:
                out.append(f"{module}:{line} imports {target} (layer {LAYERS[theirs][0]!r} "
                           f"is above {LAYERS[own][0]!r})")
    return out


def test_no_upward_imports():
    bad = violations()
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def _cycle(graph):
    """One import cycle of ``graph`` (module → set of modules) as a list, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


@pytest.mark.parametrize("package", ["vortexsim.fmm", "vortexsim.physics", "vortexsim.output",
                                     "vortexsim.geometry", "vortexsim.summation",
                                     "vortexsim.model", "vortexsim.simulation",
                                     "vortexsim.diagnostics", "vortexsim.cli",
                                     "vortexsim.validation"])
def test_no_import_cycles_within(package):
    modules = {m: p for m, p in _modules().items() if m.startswith(package + ".")}
    graph = {m: {t for _, t in _imports(m, p, _modules()) if t in modules and t != m}
             for m, p in modules.items()}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_contract_catches_a_reversed_import(tmp_path):
    """The check itself: a low module that imports a high one is reported."""
    low = tmp_path / "low.py"
    low.write_text("from ..simulation import Simulation\n", encoding="utf-8")
    bad = violations({"vortexsim.fmm.low": low})
    assert bad and "vortexsim.simulation" in bad[0] and "'fmm'" in bad[0]


def test_modules_are_small():
    long = {m: n for m, p in _modules().items()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them): {long}"


def test_simulation_class_is_thin():
    path = PACKAGE / "simulation" / "simulation.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Simulation"]
    lines = cls.end_lineno - cls.lineno + 1
    assert lines < MAX_SIMULATION_LINES, f"Simulation is {lines} lines"


def private_imports(modules=None):
    """'module:line imports name from target' for every private name imported from
    another vortexsim module (``from .x import _name``)."""
    modules = _modules() if modules is None else modules
    out = []
    for module, path in modules.items():
        package = _package_of(module, path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = _from_target(node, package)
            if not (target == "vortexsim" or target.startswith("vortexsim.")):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(f"{module}:{node.lineno} imports {alias.name} from {target}")
    return out


def test_no_private_names_across_modules():
    bad = private_imports()
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_private_import_check_catches_one(tmp_path):
    low = tmp_path / "low.py"
    low.write_text("from .pse_common import _cell_grid\n", encoding="utf-8")
    bad = private_imports({"vortexsim.physics.low": low})
    assert bad and "_cell_grid" in bad[0]
