"""The capability tables of the docs say what the solver classes declare (``normalizations``, ``takes_mlp``,
``mlp_normalizations``): a table that drifts from the code fails here, naming the row."""
import pathlib
import re

import pytest

import solvers

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
SCHEMES = ("post", "pre", "mix", "peri", "ngpt", "sqrt-depth")


def solver_class(name):
    """The exported solver class of this name (None when its optional extra is missing)."""
    try:
        return getattr(solvers, name)
    except ImportError:
        return None


def layered_of(cls):
    """The layered form of a solver (its runs of masked models with ``positions``)."""
    found = [c for c in cls.__subclasses__() if c.__name__ == "Layered" + cls.__name__]
    assert len(found) == 1, f"{cls.__name__} has no layered form"
    return found[0]


def schemes(cls, mlp=False):
    """The normalisation schemes a solver takes (with a feed-forward term: those it takes with one)."""
    taken = set(cls.normalizations)
    return taken & set(cls.mlp_normalizations or taken) if mlp else taken


def rows(path, heading):
    """The cells of the rows of the first table after ``heading`` in a docs page."""
    lines = path.read_text().split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start + 2:]:          # after the header and its rule
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip("|").split("|")])
    return table


def test_the_normalization_table_is_what_the_solvers_take():
    seen = set()
    for first, *marks in rows(DOCS / "normalization.md", "## The continuum"):
        shown = {s for s, mark in zip(SCHEMES, marks) if mark == "yes"}
        for name in re.findall(r"`(\w+)`", first.split(" with ")[0]):
            cls = solver_class(name)
            if cls is None:
                continue
            if "with `positions`" in first:
                cls = layered_of(cls)
            assert schemes(cls) == shown, f"docs/normalization.md, row {first!r}: {cls.__name__} takes {schemes(cls)}"
            seen.add(cls)
    continuum = {solver_class(n) for n in solvers.__all__ if n not in ("Particles", "Hardmax")} - {None}
    continuum = {c for c in continuum if isinstance(c, type) and issubclass(c, solvers.Solver) and c is not solvers.Solver}
    continuum |= {layered_of(c) for c in continuum if c.takes_mask}
    assert continuum <= seen, f"not in docs/normalization.md: {sorted(c.__name__ for c in continuum - seen)}"


def _quoted(cell):
    return set(SCHEMES) if cell.strip() == "all six" else set(re.findall(r'"([\w-]+)"', cell))


def test_the_feed_forward_table_is_what_the_solvers_take():
    listed = set()
    for first, domain, _, cell in rows(DOCS / "feedforward.md", "## Which solvers take it"):
        cls = solver_class(re.fullmatch(r"`solvers\.(\w+)`", first).group(1))
        main, _, layered = cell.partition("; layered:")
        assert cls.takes_mlp and schemes(cls, mlp=True) == _quoted(main), \
            f"docs/feedforward.md, row {first}: {cls.__name__} takes {schemes(cls, mlp=True)} with an MLP"
        if "layered" in domain:
            assert schemes(layered_of(cls), mlp=True) == _quoted(layered), \
                f"docs/feedforward.md, row {first}: its layered runs take {schemes(layered_of(cls), mlp=True)}"
        listed.add(cls)
    takes = {c for c in map(solver_class, solvers.__all__) if isinstance(c, type) and getattr(c, "takes_mlp", False)}
    assert takes == listed, f"docs/feedforward.md lists {sorted(c.__name__ for c in listed)}"


def test_the_steppers_table_names_the_solvers_that_offer_each_stepper():
    from solvers.timestepping import STEPPERS

    classes = {n: c for n, c in ((n, solver_class(n)) for n in solvers.__all__)
               if isinstance(c, type) and issubclass(c, solvers.Solver) and c is not solvers.Solver}
    named, before = {}, set()
    for first, _, _, users in rows(DOCS / "architecture.md", "## The steppers"):
        name = first.strip("`")
        before = before if users == "the same" else set(re.findall(r"\b(" + "|".join(classes) + r")\b", users))
        named[name] = before
    assert set(named) == set(STEPPERS)
    for stepper, users in named.items():
        offer = {n for n, c in classes.items() if stepper in c.steppers}
        assert users == offer, f"docs/architecture.md, row {stepper}: offered by {sorted(offer)}"


@pytest.mark.parametrize("page", ["normalization.md", "feedforward.md"])
def test_a_drifted_table_fails(page, tmp_path, monkeypatch):
    """The layered spectral runs with an MLP written as taking "sqrt-depth" (what feedforward.md said), or
    the causal Lagrangian's row without it: the check names the row."""
    text = (DOCS / page).read_text()
    if page == "feedforward.md":
        drifted = text.replace('"post", "sqrt-depth"; layered: "post" |', '"post", "sqrt-depth"; layered: "post", "sqrt-depth" |', 1)
        check = test_the_feed_forward_table_is_what_the_solvers_take
    else:
        drifted = text.replace("| `Lagrangian` with `positions` (causal) | yes | | | | | yes |",
                               "| `Lagrangian` with `positions` (causal) | yes | | | | | |")
        check = test_the_normalization_table_is_what_the_solvers_take
    assert drifted != text
    (tmp_path / page).write_text(drifted)
    monkeypatch.setitem(globals(), "DOCS", tmp_path)
    with pytest.raises(AssertionError, match="row"):
        check()
