"""The module names from before the floor plan (docs/architecture.md, "The floor plan").

Until issue 46 every module of the model layer sat directly in ``meanfield/``; user scripts, pickles
and saved files name them so (``meanfield.transformer.positions``, ``meanfield.results.solution.Solution``). Each old name
is kept as an alias: importing it gives the very module object of its new place, so
``import meanfield.transformer.positions``, ``from meanfield.results.solution import Solution``, ``mf.kernels`` and a pickle
that names ``meanfield.results.solution`` all keep working, and ``meanfield.transformer.positions is
meanfield.transformer.positions``.
"""
import importlib
import importlib.abc
import importlib.machinery
import sys

FLOORS = {
    "transformer": ("model", "kernels", "masks", "positions", "normalization", "feedforward", "schedule", "causal"),
    "spaces": ("quadrature", "gridded", "geodesic"),
    "sums": ("kernelsums", "spectralsums", "compiled", "_fused"),
    "observables": ("energy", "wasserstein", "w1bracket", "diagnostics"),
    "measures": ("densities", "sampling"),
    "results": ("solution", "plotting", "movies"),
}
MOVED = {f"meanfield.{module}": f"meanfield.{floor}.{module}" for floor, modules in FLOORS.items() for module in modules}


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module of its new name (the same object, imported once)."""

    def __init__(self, target):
        self.target = target
        self.spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.spec = module.__spec__     # the import machinery overwrites __spec__ with the alias's spec
        return module

    def exec_module(self, module):
        module.__spec__ = self.spec     # the module keeps its own spec (name, origin, reload)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the old dotted names of `MOVED`; every other name is left to the other finders."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(MOVED[fullname]))


def install():
    """Register the old names of the modules already imported, and put the finder of the others on
    ``sys.meta_path`` (once). Registered names are not set as attributes of ``meanfield``, so an import
    of ``meanfield.observables.wasserstein`` leaves ``mf.wasserstein`` the function, as before."""
    for old, new in MOVED.items():
        if new in sys.modules:
            sys.modules.setdefault(old, sys.modules[new])
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())


def attribute(name):
    """The module an attribute ``meanfield.<name>`` of the old layout names (``mf.kernels``).

    Raises
    ------
    AttributeError
        ``name`` was never a module of ``meanfield``.
    """
    full = f"meanfield.{name}"
    if full not in MOVED:
        raise AttributeError(f"module 'meanfield' has no attribute {name!r}")
    return importlib.import_module(full)
