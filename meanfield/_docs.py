"""Docstring fragments that several docstrings share, written once (as numpy's and scipy's docstring
helpers do: ``scipy._lib.doccer``).

A docstring names a fragment on a line of its own, ``{name}`` at the indentation where the fragment
goes; `fill_doc` puts the text of `FRAGMENTS` there, each line indented like the placeholder. The
decorator `doc_params` fills a function's or a class's docstring where it is defined, and
`solvers.Solver` fills the docstring of every solver class. The API pages read the filled docstrings
(``force_inspection`` on their blocks in docs/api.md), and doctests run them.

>>> print(fill_doc('''Parameters
...     ----------
...     {threads}'''))
Parameters
    ----------
    threads : int >= 1, optional
        Threads of the solver's kernel sums and transforms (default: `meanfield.threads.default_threads`);
        the result does not depend on it.
"""
import re

from .errors import InvalidInput

FRAGMENTS = {
    "threads": """threads : int >= 1, optional
    Threads of the solver's kernel sums and transforms (default: `meanfield.threads.default_threads`);
    the result does not depend on it.""",
    "density_returns": """Returns
-------
Density
    A callable ``f(x)`` on points of shape (..., d).""",
    "beta_dim": """beta : float, of either sign
    Inverse temperature β.
dim : int >= 2
    Ambient dimension d.""",
    "measure_raises": """Raises
------
ValueError
    Points off the sphere, weights negative or not summing to 1.""",
    "fourier_run": """>>> import numpy as np
>>> import meanfield as mf, solvers
>>> rho0 = mf.densities.perturbed_uniform(0.2, 1, dim=2)
>>> sol = solvers.FourierCircle(mf.Model(beta=1.0, dim=2), modes=16).solve(rho0, [0.0, 1.0],
...                                                                        progress=False)""",
    "fourier_run3": """>>> import numpy as np
>>> import meanfield as mf, solvers
>>> rho0 = mf.densities.perturbed_uniform(0.2, 1, dim=2)             # 1 + 0.2 cos θ
>>> sol = solvers.FourierCircle(mf.Model(beta=1.0, dim=2), modes=16).solve(rho0, [0.0, 1.0, 2.0],
...                                                                        progress=False)""",
}
PLACEHOLDER = re.compile(r"^([ \t]*)\{(\w+)\}[ \t]*$", re.MULTILINE)


def fill_doc(doc, fragments=None):
    """``doc`` with each line ``{name}`` replaced by the fragment ``name`` of ``fragments`` (default
    `FRAGMENTS`), indented like the line; ValueError naming an unknown fragment."""
    fragments = FRAGMENTS if fragments is None else fragments

    def put(match):
        indent, name = match.groups()
        if name not in fragments:
            raise InvalidInput(f"docstring fragment {{{name}}} is not one of {sorted(fragments)}.")
        return "\n".join(indent + line if line else line for line in fragments[name].splitlines())

    return doc if not doc else PLACEHOLDER.sub(put, doc)


def doc_params(obj):
    """Decorator: fill the docstring of ``obj`` (`fill_doc`) where it is defined."""
    obj.__doc__ = fill_doc(obj.__doc__)
    return obj
