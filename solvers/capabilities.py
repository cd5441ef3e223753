"""The capability tables of the docs, made from what the solver classes and the steppers declare.

Each table is a Markdown table generated from the class attributes of the solvers of the package
(`solvers.solver_classes` and their forms, `solvers.forms_of`): ``normalizations`` and
``mlp_normalizations``/``takes_mlp`` (contract item 2 of `solvers.base`), ``steppers``, and the
steppers' ``kind`` and ``options`` (`solvers.timestepping.STEPPERS`). A docs page holds a marker
``<!-- capabilities: NAME -->`` on a line of its own in place of the table; the docs build (docs/hooks.py) writes the
table there, so a new solver appears in every table without an edit of the docs.
"""
import re

from meanfield.errors import InvalidInput
from meanfield.transformer.model import NORMALIZATIONS

from . import forms_of, solver_classes
from .timestepping import STEPPERS

MARKER = re.compile(r"^<!-- capabilities: ([\w-]+) -->$", re.MULTILINE)      # on a line of its own


def _classes():
    """The solvers of the package, then their forms (the layered ones)."""
    solvers = list(solver_classes().values())
    return solvers + [form for cls in solvers for form in forms_of(cls)]


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def _names(classes):
    return ", ".join(f"`{c.__name__}`" for c in classes)


def _grouped(classes, key):
    """[(key, [classes])] of the classes with equal ``key``, in the order of their first appearance."""
    groups = {}
    for cls in classes:
        groups.setdefault(key(cls), []).append(cls)
    return list(groups.items())


def mlp_schemes(cls):
    """The normalisation schemes ``cls`` takes together with a feed-forward term (none without one)."""
    if not cls.takes_mlp:
        return ()
    return tuple(s for s in cls.normalizations if s in (cls.mlp_normalizations or cls.normalizations))


def normalization_table():
    """Which solver takes which ``Model.normalization`` scheme (docs/normalization.md)."""
    rows = [[_names(group), *("yes" if s in schemes else "" for s in NORMALIZATIONS)]
            for schemes, group in _grouped(_classes(), lambda c: frozenset(c.normalizations))]
    return _table(["solver", *NORMALIZATIONS], rows)


def feed_forward_table():
    """The solvers that take a feed-forward term, and the schemes they take with it (docs/feedforward.md)."""
    rows = [[_names(group), ", ".join(f'"{s}"' for s in schemes)]
            for schemes, group in _grouped([c for c in _classes() if c.takes_mlp], mlp_schemes)]
    return _table(["solver", "schemes with a feed-forward term (`normalization=`)"], rows)


def steppers_table():
    """The named steppers, their options and the solvers that offer each (docs/architecture.md)."""
    classes = list(solver_classes().values())
    rows = [[f"`{name}`", stepper.kind, ", ".join(f"`{k}`" for k in stepper.options) or "—",
             _names(c for c in classes if name in c.steppers)] for name, stepper in STEPPERS.items()]
    return _table(["name", "kind", "options", "used by"], rows)


TABLES = {"normalizations": normalization_table, "feed-forward": feed_forward_table, "steppers": steppers_table}


def fill(markdown):
    """``markdown`` with each marker ``<!-- capabilities: NAME -->`` replaced by the table ``NAME`` of
    `TABLES` (ValueError naming an unknown one)."""
    def table(match):
        name = match.group(1)
        if name not in TABLES:
            raise InvalidInput(f"`<!-- capabilities: {name} -->`: no such table; known: {sorted(TABLES)}.")
        return TABLES[name]()
    return MARKER.sub(table, markdown)


__all__ = ["normalization_table", "feed_forward_table", "steppers_table", "mlp_schemes", "fill", "TABLES", "MARKER"]
