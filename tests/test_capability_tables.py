"""The capability tables of the docs are made from what the solver classes declare (`solvers.capabilities`):
each page holds a marker where its table goes, no page writes such a table by hand, and each table says
what the classes declare (``normalizations``, ``takes_mlp``/``mlp_normalizations``, ``steppers``)."""
import pathlib
import re

import pytest

import solvers
from meanfield.transformer.model import NORMALIZATIONS
from solvers import capabilities
from solvers.timestepping import STEPPERS

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
PAGES = {"normalizations": "normalization.md", "feed-forward": "feedforward.md", "steppers": "architecture.md"}


def rows(table):
    """{class or stepper name: the other cells} of a generated table (one entry per name of a row)."""
    out = {}
    for line in table.splitlines()[2:]:
        first, *cells = [cell.strip() for cell in line.strip("|").split("|")]
        for name in re.findall(r"`([\w-]+)`", first):
            out[name] = cells
    return out


def every_class():
    listed = list(solvers.solver_classes().values())
    return listed + [form for cls in listed for form in solvers.forms_of(cls)]


@pytest.mark.parametrize("table, page", sorted(PAGES.items()))
def test_each_page_holds_the_marker_of_its_table_and_no_copy_of_it(table, page):
    text = (DOCS / page).read_text()
    assert f"<!-- capabilities: {table} -->" in text, f"docs/{page} lost the marker of the {table} table"
    header = capabilities.TABLES[table]().splitlines()[0]
    assert header not in text, f"docs/{page} writes the {table} table by hand: the docs build makes it"
    assert header in capabilities.fill(text)


def test_the_normalization_table_is_what_the_classes_take():
    table = rows(capabilities.normalization_table())
    for cls in every_class():
        shown = {s for s, mark in zip(NORMALIZATIONS, table[cls.__name__]) if mark == "yes"}
        assert shown == set(cls.normalizations), cls.__name__
    assert {"FourierCircle", "LayeredFourierCircle", "Lagrangian", "LayeredLagrangian", "Particles"} <= set(table)


def test_the_feed_forward_table_is_what_the_classes_take_with_an_mlp():
    table = rows(capabilities.feed_forward_table())
    assert set(table) == {c.__name__ for c in every_class() if c.takes_mlp}
    for cls in every_class():
        if cls.takes_mlp:
            assert set(re.findall(r'"([\w-]+)"', table[cls.__name__][0])) == set(capabilities.mlp_schemes(cls))
    # the layered spectral runs take the feed-forward term under "post" only (issue 46: the docs said "sqrt-depth")
    assert table["LayeredFourierCircle"] == ['"post"'] and "sqrt-depth" in table["FourierCircle"][0]


def test_the_steppers_table_names_the_solvers_that_offer_each_stepper():
    table = rows(capabilities.steppers_table())
    assert set(table) == set(STEPPERS)
    for name, (kind, options, users) in table.items():
        offer = {n for n, c in solvers.solver_classes().items() if name in c.steppers}
        assert set(re.findall(r"`(\w+)`", users)) == offer and kind == STEPPERS[name].kind, name
        assert set(re.findall(r"`(\w+)`", options)) == set(STEPPERS[name].options), name


def test_an_unknown_marker_is_refused():
    with pytest.raises(ValueError, match="no such table"):
        capabilities.fill("<!-- capabilities: colours -->")
