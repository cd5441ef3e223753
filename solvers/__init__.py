"""The numerical methods: each turns a `meanfield.Model` plus a resolution into a `Solution`.

`solver_classes()` lists them; docs/architecture.md says how they are built and how to add one.

A solver is found where it is defined: every module of this package is read (its source, without
importing it) for the classes it defines, so ``solvers.<Name>`` imports only the module that defines
``Name`` (a missing optional dependency such as dolfinx only affects its own solver), and a new
module is a new solver without any edit here. The solvers of the package (`solver_classes`) are the
`Solver` subclasses its modules define that are not a form of another (the layered forms).
"""
import functools
import importlib
import pathlib
import pkgutil
import re

from meanfield.errors import Interrupted, NonFiniteState, SolverError, UnderResolved, UnsupportedModel
from meanfield.results.solution import register_flow_map

from .base import Solver
from .tracers import flow_map

_EAGER = ["Solver", "UnderResolved", "UnsupportedModel", "SolverError", "NonFiniteState", "Interrupted"]
_CLASS = re.compile(r"^class (\w+)\b", re.MULTILINE)


@functools.cache
def _definitions(path):
    """{class name: module} of the classes defined at the top level of the package's modules (their
    source, read as text), for the package path ``path`` (a tuple: a test may add a folder)."""
    where = {}
    for info in pkgutil.iter_modules(list(path)):
        if info.ispkg or info.name.startswith("_"):
            continue
        source = (pathlib.Path(info.module_finder.path) / f"{info.name}.py").read_text(encoding="utf-8")
        for name in _CLASS.findall(source):
            where.setdefault(name, f"{__name__}.{info.name}")
    return where


def _exported(value):
    """A solver class, one of its forms, or an error a run raises (`SolverError`): what ``solvers.<Name>``
    gives."""
    return isinstance(value, type) and issubclass(value, (Solver, SolverError))


def __getattr__(name):
    if name == "__all__":
        errors = [n for n, v in _loaded().items() if issubclass(v, SolverError) and n not in _EAGER]
        return _EAGER + sorted(errors) + list(solver_classes())
    module = _definitions(tuple(__path__)).get(name)
    if module is not None:
        try:
            value = getattr(importlib.import_module(module), name)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                raise AttributeError(f"solvers.{name} is not available yet") from None
            raise
        if _exported(value):
            globals()[name] = value
            return value
    raise AttributeError(f"module 'solvers' has no attribute {name!r}")


def _loaded():
    """{name: value} of every exported class of the package's modules (each module imported)."""
    out = {}
    for name in _definitions(tuple(__path__)):
        try:
            out[name] = __getattr__(name)
        except AttributeError:
            continue
    return out


def solver_classes():
    """{name: class} of the solvers of the package, in the order of their names: each `Solver` subclass
    defined in a module of ``solvers`` that does not derive from another (``LayeredFourierCircle`` is a
    form of `FourierCircle`, `forms_of`). The configurations, `Solution.flow`, the protocol test and the
    capability tables of the docs (`solvers.capabilities`) read it."""
    found = {n: v for n, v in _loaded().items() if issubclass(v, Solver) and v is not Solver}
    return {n: c for n, c in sorted(found.items())
            if not any(issubclass(c, other) for other in found.values() if other is not c)}


def forms_of(cls):
    """The solver classes of the package that derive from ``cls`` (its layered form, for instance)."""
    return [v for v in _loaded().values() if v is not cls and issubclass(v, cls)]


def __dir__():
    return sorted(set(globals()) | set(__getattr__("__all__")))


# `Solution.flow` re-runs a Solution on the solver named in it, found where it is defined
register_flow_map(functools.partial(flow_map, classes=__getattr__))
