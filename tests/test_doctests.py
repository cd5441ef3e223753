"""The Examples of the public contract's docstrings run (doctest), one case per module; every module
listed has at least one example. The names are those of tests/test_docstrings.py."""
import doctest
import importlib

import pytest

MODULES = [
    "meanfield.transformer.model", "meanfield.transformer.kernels", "meanfield.observables.energy", "meanfield.measures.laws", "meanfield.measures.tabulated", "meanfield.measures.files",
    "meanfield.measures.sampling",
    "meanfield.observables.wasserstein", "meanfield.errors", "meanfield.results.solution", "meanfield.results.netcdf", "meanfield.transformer.causal", "meanfield.transformer.schedule",
    "meanfield.spaces.quadrature", "meanfield.spaces.harmonics", "meanfield.sums.spectralsums", "meanfield.observables.w1bracket", "meanfield.threads",
    "meanfield.representations.base", "meanfield.landscape.energy", "meanfield.landscape.census",
    "meanfield.landscape.critical", "meanfield.landscape.branches", "meanfield.landscape.branchbound",
    "solvers.base", "solvers.fourier", "solvers.harmonics", "solvers.gegenbauer", "solvers.lagrangian",
    "solvers.particles", "solvers.gaussian", "solvers.fem",
    "solvers.stationary.anchors", "solvers.stationary.branches", "solvers.stationary.self_consistency",
]
NEEDS = {"solvers.fem": ("mpi4py.MPI", "dolfinx")}   # the modules of an optional extra its examples need
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    for needed in NEEDS.get(name, ()):
        pytest.importorskip(needed, reason=f"the examples of {name} need {needed} (an optional extra)")
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    assert tests, f"{name} has no example"
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples of {name} failed (output above)"
    import matplotlib.pyplot as plt

    plt.close("all")
