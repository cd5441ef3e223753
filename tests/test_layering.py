"""The floors of the house (docs/architecture.md, "The floor plan"): no import cycle between files, none
between folders, and only the top of `meanfield` (experiments, command line, the ensembles of
`meanfield.fluctuations`) imports `solvers`."""
import ast
import functools
import pathlib
import re
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("meanfield", "solvers")


def _modules(root):
    """{dotted module name: path} of every module of the two packages under ``root``."""
    out = {}
    for pkg in PACKAGES:
        for path in (root / pkg).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _raw_imports(name, path):
    """(module, imported name or None) pairs of the two packages that ``path`` imports, at module level
    and inside functions alike; a lazy table ``_LAZY = {"Name": "module"}`` counts as imports too."""
    return _parsed_imports(name, path.name == "__init__.py", path.read_text())


@functools.lru_cache(maxsize=None)
def _parsed_imports(name, package, text):
    """`_raw_imports` of a module's text (parsed once: the checks below read copies of the same tree)."""
    here = name.split(".") if package else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1]) if node.level else ""
            mod = ".".join(m for m in (base, node.module) if m)
            out += [(mod, a.name) for a in node.names]
        elif (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["_LAZY"]
              and isinstance(node.value, ast.Dict)):
            out += [(v.value, k.value) for k, v in zip(node.value.keys, node.value.values)]
    return [(m, a) for m, a in out if m.split(".")[0] in PACKAGES]


def import_graph(root):
    """The import graph between modules, each edge resolved to the module that defines the name: an import
    of a name that a package's ``__init__`` re-exports is an edge to the submodule it comes from."""
    modules = _modules(root)
    raw = {name: _raw_imports(name, path) for name, path in modules.items()}

    def source(mod, attr, seen=()):
        if attr is not None and f"{mod}.{attr}" in modules:
            return f"{mod}.{attr}"
        if attr is not None and mod in modules and modules[mod].name == "__init__.py" and (mod, attr) not in seen:
            for m, a in raw[mod]:
                if a == attr:
                    return source(m, a, seen + ((mod, attr),))
        return mod

    return {name: {source(m, a) for m, a in edges} & set(modules) - {name} for name, edges in raw.items()}


def folder(name):
    """The folder a module belongs to: ``meanfield.spaces.gridded`` -> ``meanfield.spaces``. A module
    directly in a package (``meanfield.errors``, ``solvers.particles``) is a floor of its own."""
    return ".".join(name.split(".")[:2])


def folder_graph(root):
    """The import graph between folders: an edge wherever a module of one imports a module of another."""
    out = {}
    for name, deps in import_graph(root).items():
        out.setdefault(folder(name), set()).update(folder(d) for d in deps)
    return {f: deps - {f} for f, deps in out.items()}


def find_cycle(graph):
    """One cycle (a list of nodes, first = last) of ``graph`` {node: set of nodes}, or None."""
    state = {}

    def visit(n, stack):
        state[n] = 1
        for d in sorted(graph[n]):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            found = None if d in state else visit(d, stack + [d])
            if found:
                return found
        state[n] = 2
        return None

    for n in sorted(graph):
        found = None if n in state else visit(n, [n])
        if found:
            return found
    return None


def import_cycle(root):
    """One import cycle (a list of modules) of the tree under ``root``, or None."""
    return find_cycle(import_graph(root))


def folder_cycle(root):
    """One loop between folders (a list of folders) of the tree under ``root``, or None."""
    return find_cycle(folder_graph(root))


def test_import_graph_has_no_cycles_and_only_the_top_layer_imports_solvers():
    for name, deps in import_graph(ROOT).items():
        if name.startswith("meanfield") and not name.startswith(("meanfield.experiments", "meanfield.cli",
                                                                 "meanfield.fluctuations")):
            assert not any(d.startswith("solvers") for d in deps), f"{name} imports solvers: {deps}"
    cycle = import_cycle(ROOT)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_no_loop_between_folders():
    cycle = folder_cycle(ROOT)
    assert cycle is None, "loop between folders: " + " -> ".join(cycle or ())


def _copy(tmp_path):
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    assert import_cycle(tmp_path) is None and folder_cycle(tmp_path) is None


def _append(path, line, deferred):
    body = "\n\ndef _circle():\n    " + line if deferred else "\n" + line
    path.write_text(path.read_text() + body)


@pytest.mark.parametrize("deferred", [False, True])
def test_the_layering_check_sees_a_circle_through_a_package_even_deferred(tmp_path, deferred):
    """A circle closed through a re-export of ``meanfield.representations`` (what gridded <-> representations
    was), at module level or inside a function, is reported."""
    _copy(tmp_path)
    _append(tmp_path / "meanfield" / "spaces" / "gridded.py", "from ..representations import Representation\n", deferred)
    cycle = import_cycle(tmp_path)
    assert cycle is not None and "meanfield.spaces.gridded" in cycle and "meanfield.representations.base" in cycle


@pytest.mark.parametrize("deferred", [False, True])
def test_the_layering_check_sees_a_loop_between_folders_that_no_file_closes(tmp_path, deferred):
    """spaces.geodesic importing observables.energy closes no circle of files (energy does not reach
    geodesic) but a loop of folders (observables.wasserstein imports spaces.geodesic): the folder check
    reports it, the file check does not."""
    _copy(tmp_path)
    _append(tmp_path / "meanfield" / "spaces" / "geodesic.py", "from ..observables.energy import discrete_energy\n",
            deferred)
    assert import_cycle(tmp_path) is None
    loop = folder_cycle(tmp_path)
    assert loop is not None and {"meanfield.spaces", "meanfield.observables"} <= set(loop), loop


def drawn_floors(text):
    """The floors of the drawing in docs/architecture.md, top first: {folder or module: rank}."""
    block = text.split("## The floor plan", 1)[1].split("```", 2)[1]
    ranks = {}
    for rank, line in enumerate(row for row in block.splitlines() if row.strip()):
        head, rest = (re.split(r"\s{2,}", line.strip(), maxsplit=1) + [""])[:2]
        if head == "meanfield/ (ground)":
            names = re.split(r"\s{2,}", rest)[0].split(",")
            ranks.update({f"meanfield.{n.strip()}": rank for n in names} | {"meanfield._aliases": rank})
        else:
            for path in head.split(","):
                ranks[path.strip().rstrip("/").removesuffix(".py").replace("/", ".")] = rank
    return ranks


def _rank(ranks, name):
    if name.startswith("solvers"):
        return ranks["solvers"]
    return ranks["meanfield.cli" if name == "meanfield.__main__" else name]


def test_the_drawn_floor_plan_is_the_import_order():
    """Every folder of meanfield is drawn in docs/architecture.md, and imports only its own floor or floors
    drawn below it (the package's ``__init__`` re-exports every floor and is left out)."""
    ranks = drawn_floors((ROOT / "docs" / "architecture.md").read_text())
    graph = folder_graph(ROOT)
    undrawn = {f for f in graph if f.startswith("meanfield.") and f != "meanfield.__main__"} - set(ranks)
    assert not undrawn, f"{undrawn} are not drawn in docs/architecture.md"
    for f, deps in graph.items():
        if f == "meanfield":
            continue
        above = [d for d in deps if _rank(ranks, d) < _rank(ranks, f)]
        assert not above, f"{f} imports {above}, drawn above it in docs/architecture.md"
