"""Shared docstring fragments (`meanfield._docs`): a placeholder line becomes the fragment, indented like
it, in Python (``__doc__``, doctests) and on the API pages (the griffe extension docs/griffe_fragments.py)."""
import pytest

import solvers
from meanfield._docs import FRAGMENTS, PLACEHOLDER, doc_params, fill_doc


def test_a_placeholder_line_becomes_the_fragment_indented_like_it():
    doc = "Parameters\n    ----------\n    {threads}\n    other : int\n"
    filled = fill_doc(doc)
    assert filled == ("Parameters\n    ----------\n    threads : int >= 1, optional\n        Threads of the solver's "
                      "kernel sums and transforms (default: `meanfield.threads.default_threads`);\n        the result "
                      "does not depend on it.\n    other : int\n")
    assert fill_doc("S^{d-1} and {x} inside a line stay") == "S^{d-1} and {x} inside a line stay"
    with pytest.raises(ValueError, match=r"\{thread\} is not one of"):
        fill_doc("    {thread}\n")


def test_the_decorator_and_every_solver_class_fill_their_docstrings():
    @doc_params
    def f():
        """Returns.

        {density_returns}
        """
    assert "A callable ``f(x)``" in f.__doc__ and not PLACEHOLDER.search(f.__doc__)
    for cls in solvers.solver_classes().values():
        assert not PLACEHOLDER.search(cls.__doc__), cls.__name__
    assert FRAGMENTS["threads"].splitlines()[0] in solvers.FourierCircle.__doc__


def test_the_api_pages_see_the_filled_docstrings():
    griffe = pytest.importorskip("griffe")
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "docs"))
    try:
        from griffe_fragments import FillFragments
    finally:
        sys.path.pop(0)
    module = griffe.load("solvers.gaussian", extensions=griffe.load_extensions(FillFragments()))
    assert "threads : int >= 1, optional" in module["Gaussian"].docstring.value
