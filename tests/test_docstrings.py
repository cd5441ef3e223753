"""The public contract's names have numpy-style docstrings: a Parameters section that names every
argument of the signature (a class: of its constructor), and, for at least 90% of them, an Examples
block (run as doctests by tests/test_doctests.py). The test lists the names that fall short."""
import importlib
import inspect
import re

import pytest

# "module:qualname". A name that is an instance attribute (no object of its own on the class, like
# ``Solution.t``) must be listed in the Attributes section of its class.
CONTRACT = [
    # the model
    "meanfield:Model", "meanfield:Model.is_zonal",
    "meanfield:kernel_multipliers", "meanfield:fastest_mode", "meanfield:interaction_energy",
    # densities, samples, distances, files
    "meanfield.measures.densities:uniform", "meanfield.measures.densities:von_mises_fisher", "meanfield.measures.densities:mixture",
    "meanfield.measures.densities:perturbed_uniform", "meanfield.measures.densities:fourier_modes",
    "meanfield.measures.densities:spherical_harmonics", "meanfield.measures.densities:on_grid", "meanfield.measures.densities:from_file",
    "meanfield:from_pyshtools", "meanfield:sample", "meanfield:wasserstein", "meanfield:load",
    "meanfield:UnsupportedModel",
    # the one result type
    "meanfield:Solution", "meanfield:Solution.t", "meanfield:Solution.energy", "meanfield:Solution.mass",
    "meanfield:Solution.density", "meanfield:Solution.measure", "meanfield:Solution.positions",
    "meanfield:Solution.weights", "meanfield:Solution.state", "meanfield:Solution.to_xarray",
    "meanfield:Solution.save", "meanfield:Solution.plot", "meanfield:Solution.animate", "meanfield:Solution.flow",
    "meanfield:Solution.mean", "meanfield:Solution.covariance",
    # the representations' contract and the state of one saved time
    "meanfield.representations:Representation", "meanfield.representations:State",
    "meanfield.representations:State.density", "meanfield.representations:State.measure",
    "meanfield.representations:State.to_grid", "meanfield.representations:State.to_pyshtools",
    # the solvers: constructors and the one solve
    *[f"solvers:{cls}{member}" for cls in ("FourierCircle", "SphericalHarmonics", "FiniteElements", "Particles",
                                           "Lagrangian", "Gegenbauer", "Gaussian") for member in ("", ".solve")],
    # stationary states of the noisy equation
    "solvers.stationary:critical_noise", "solvers.stationary:beta_star", "solvers.stationary:branch",
    "solvers.stationary:self_consistent",
    # the linear theory of causal attention (lost in the middle)
    "meanfield.transformer.causal:rate", "meanfield.transformer.causal:green_function", "meanfield.transformer.causal:linear_response",
    "meanfield.transformer.causal:response_profile", "meanfield.transformer.causal:critical_time", "meanfield.transformer.causal:psi",
    "meanfield.transformer.causal:log_ratio", "meanfield.transformer.causal:signal_weights", "meanfield.transformer.causal:profile_rates",
    # the other top-level names of both packages (meanfield.__all__, solvers.__all__)
    "meanfield:Schedule", "meanfield:velocity_multipliers", "meanfield:linear_growth_rates",
    "meanfield:energy_from_spectrum", "meanfield:uniform_energy", "meanfield:dirac_energy",
    "meanfield:sphere_quadrature", "meanfield:kernel_distance", "meanfield:w1_to_dirac", "meanfield:w1_to_uniform",
    "meanfield:w1_bracket", "meanfield:W1Bracket", "meanfield:default_threads", "meanfield:use_threads",
    "meanfield:SolverError", "meanfield:UnderResolved", "meanfield:NonFiniteState", "meanfield:Interrupted",
    "solvers:Solver", "solvers:CovarianceBlowUp",
    # the energy landscape of n tokens (Problem 3)
    "meanfield.landscape:critical_points", "meanfield.landscape:CriticalPoint",
    "meanfield.landscape:stability_threshold", "meanfield.landscape:first_spurious_maximum",
]

HEADER = re.compile(r"^(\S[^\n]*)\n-{3,}[ \t]*$", re.M)
ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_][\w]*(?:\s*,\s*\*{0,2}[A-Za-z_][\w]*)*)\s*(?::|$)")


def sections(doc):
    """{title: body} of the numpy-style sections of a docstring ("Parameters", "Examples", ...)."""
    doc = inspect.cleandoc(doc or "")
    heads = list(HEADER.finditer(doc))
    return {m.group(1).strip(): doc[m.end():(heads[k + 1].start() if k + 1 < len(heads) else len(doc))]
            for k, m in enumerate(heads)}


def entries(body):
    """The names an entry list documents (``Q, K : array`` documents Q and K; ``**options`` options)."""
    names = set()
    for line in body.splitlines():
        m = ENTRY.match(line)           # entries start in the first column, their descriptions are indented
        if m:
            names.update(n.strip().lstrip("*") for n in m.group(1).split(","))
    return names


def resolve(name):
    """(the object, its owner class or None, whether it is an instance attribute) of "module:qualname"."""
    module, qualname = name.split(":")
    obj, owner = importlib.import_module(module), None
    *path, last = qualname.split(".")
    for part in path:
        obj = getattr(obj, part)
    if isinstance(obj, type):
        owner = obj
        for klass in obj.__mro__:                 # properties stay properties (not their values)
            if last in vars(klass):
                return vars(klass)[last], owner, False
        return None, owner, True
    return getattr(obj, last), None, False


def arguments(obj):
    """The named arguments a docstring must document (self, *args and **kwargs left out); None when the
    object takes none (a property, a class whose constructor is inherited from a builtin)."""
    if isinstance(obj, property):
        return None
    if isinstance(obj, type):
        defining = next(k for k in obj.__mro__ if "__init__" in vars(k))
        if defining.__module__ == "builtins":
            return None
        target = obj.__init__
    else:
        target = obj
    params = list(inspect.signature(target).parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    named = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return named if params else None


def docstring(obj):
    return (obj.fget if isinstance(obj, property) else obj).__doc__


def inherited_solve(name, obj, owner):
    """Whether ``name`` is a solver's ``solve`` inherited from `solvers.Solver` (whose module names no
    particular solver): its examples are those of the solver's class that call ``.solve(``."""
    return (owner is not None and name.endswith(".solve") and obj.__qualname__ != f"{owner.__name__}.solve"
            and ".solve(" in sections(owner.__doc__).get("Examples", ""))


def shortfalls(name):
    """What the docstring of ``name`` lacks: a list of words (empty when complete), and whether it has
    an Examples section."""
    obj, owner, attribute = resolve(name)
    if attribute:
        listed = entries(sections(owner.__doc__).get("Attributes", ""))
        last = name.rsplit(".", 1)[1]
        return ([] if last in listed else [f"`{last}` in the Attributes of {owner.__name__}"],
                "Examples" in sections(owner.__doc__))
    parts = sections(docstring(obj))
    missing = []
    wanted = arguments(obj)
    if wanted is not None:
        if "Parameters" not in parts:
            missing.append("Parameters")
        else:
            absent = [a for a in wanted if a not in entries(parts["Parameters"])]
            if absent:
                missing.append(f"Parameters entries for {absent}")
    return missing, "Examples" in parts or inherited_solve(name, obj, owner)


def test_sections_are_parsed():
    doc = """Summary.

    Parameters
    ----------
    Q, K : (m, d) arrays
        Query and key.
    **options
        More.

    Examples
    --------
    >>> 1 + 1
    2
    """
    parts = sections(doc)
    assert set(parts) == {"Parameters", "Examples"}
    assert entries(parts["Parameters"]) == {"Q", "K", "options"}
    assert shortfalls("meanfield:Model")[0] == []


def test_contract_names_resolve():
    for name in CONTRACT:
        obj, _, attribute = resolve(name)
        assert attribute or obj is not None, name


def test_every_contract_name_has_parameters():
    lacking = {name: missing for name in CONTRACT for missing in [shortfalls(name)[0]] if missing}
    assert not lacking, "docstrings without a complete Parameters section:\n" + "\n".join(
        f"  {name}: {', '.join(missing)}" for name, missing in lacking.items())


def test_most_contract_names_have_examples():
    without = [name for name in CONTRACT if not shortfalls(name)[1]]
    share = 1 - len(without) / len(CONTRACT)
    assert share >= 0.9, (f"{share:.0%} of the contract's names have an Examples section (at least 90% wanted); "
                          "without:\n  " + "\n  ".join(without))


@pytest.mark.parametrize("name", ["meanfield:Solution.t", "solvers:Particles.solve"])
def test_shortfalls_can_be_found(name, monkeypatch):
    """Removing a section is noticed (the checks can fail)."""
    obj, owner, attribute = resolve(name)
    holder = owner if attribute else obj
    doc = holder.__doc__
    title = "Attributes" if attribute else "Parameters"
    stripped = doc.replace(title, "Notes") if title in doc else doc + "\n\nNotes\n-----\n"
    monkeypatch.setattr(holder, "__doc__", stripped)
    assert shortfalls(name)[0]
