"""The experiment registry: the options declared once give the keyword arguments, the command line and
the sweep keys, and they agree for every experiment."""
import contextlib
import dataclasses
import inspect
import io
import tomllib

import pytest

from meanfield.cli import build_parser, main
from meanfield.experiments import EXPERIMENTS
from meanfield.experiments.options import Options, experiment, fields, option
from meanfield.experiments.sweep import parse_sweep

NAMES = ["verify-prop34", "mean-field-limit", "phase-diagram", "noise-transition", "metastability", "lost-in-the-middle",
         "landscape", "fluctuations", "hardmax-limit"]
RUN = {"out", "options", "quick", "progress", "workers", "scheduler", "threads"}


def _defaults(name):
    """dest -> default of a subcommand's flags that are not how it runs (nothing given on the line)."""
    given = vars(build_parser().parse_args([name]))
    return {k: v for k, v in given.items() if k not in RUN | {"command"}}


def _help(name):
    """``meanfield <name> --help``, whitespace normalised."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        main([name, "--help"])
    return " ".join(text.getvalue().split())


def _sweep(name, parameters="", grid=""):
    text = f'[sweep]\nexperiment = "{name}"\n{grid}[parameters]\n{parameters}'
    return parse_sweep(tomllib.loads(text))


def test_every_experiment_is_registered_in_the_order_of_the_help():
    assert list(EXPERIMENTS) == NAMES
    text = build_parser().format_help()
    assert [text.index(n) for n in NAMES] == sorted(text.index(n) for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_flags_sweep_keys_and_signature_come_from_one_declaration(name):
    exp = EXPERIMENTS[name]
    declared = {f.name: f.default for f in exp.fields}
    # the keyword arguments of the function: every option, with its default, and nothing else
    params = inspect.signature(exp.function).parameters
    assert {k: p.default for k, p in params.items() if k not in RUN} == declared
    assert all(params[k].kind is inspect.Parameter.KEYWORD_ONLY for k in declared)
    assert {"workers", "scheduler"} <= set(params) if exp.parallel else not {"workers", "scheduler"} & set(params)
    # the flags: one per option that a command line can spell (not a table), with the same default
    assert _defaults(name) == {f.name: f.default for f in exp.fields if f.kind is not dict}
    shown = _help(name)
    assert all(flag in shown for f in exp.fields for flag in f.flags)
    assert all(f.flags for f in exp.fields if f.kind is not dict)
    # the sweep: every option is a key of [parameters] and of [sweep.grid]; nothing else is
    assert set(_sweep(name).cells[0].config) == set()
    for f in exp.fields:
        if f.default is not None and f.kind is not dict:
            value = list(f.default) if isinstance(f.default, tuple) else f.default
            toml = f"{f.name} = {_toml(value)}\n"
            assert _sweep(name, toml).cells[0].config == {f.name: value}
            assert _sweep(name, grid=f"[sweep.grid]\n{f.name} = [{_toml(value)}]\n").keys == [f.name]
    with pytest.raises(ValueError, match="`parameters.not_an_option`"):
        _sweep(name, "not_an_option = 1\n")
    # the docstring lists every option
    assert all(f"{k} :" in exp.function.__doc__ for k in declared)


def _toml(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


@pytest.mark.parametrize("name", NAMES)
def test_every_flag_shows_its_default_in_help(name):
    text = _help(name)
    for f in EXPERIMENTS[name].fields:
        if f.flags:
            assert " ".join(f.help_text().split()) in text, f.name


@pytest.mark.parametrize("args, shown", [
    (["phase-diagram", "--scheme", "rk4"], ["--scheme", "'adaptive'", "'euler-normalize'"]),
    (["phase-diagram", "--betas", "1,x"], ["--betas", "numbers"]),
    (["metastability", "--degrees", "1.5"], ["--degrees", "int"])])
def test_a_value_the_parser_refuses_exits_2_in_one_line(args, shown, capsys):
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(s in err[0] for s in shown), err


@pytest.mark.parametrize("args, shown", [
    (["phase-diagram", "--delta", "2"], ["--delta", "`delta`", "<= 1"]),
    (["noise-transition", "--dims", "2,4"], ["--dims", "`dims`", "one of 2, 3"]),
    (["verify-prop34", "--parts", "5"], ["--parts", "`parts`", "one of 1, 2, 3, 4"]),
    (["noise-transition", "-n", "3"], ["-n/--particles", "`n_particles`", ">= 10"]),
    (["metastability", "--epsilon", "0"], ["--epsilon", "`epsilon`", "a number > 0 and <= 0.01"])])
def test_a_value_out_of_range_exits_2_naming_the_option_and_what_it_accepts(args, shown, tmp_path, capsys):
    assert main([*args, "--out", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(s in err[0] for s in shown), err
    assert not (tmp_path / "never").exists()


def test_bad_values_in_a_sweep_fail_before_any_work():
    with pytest.raises(ValueError, match=r"`delta` must be a number > 0 and <= 1, got -1.0. \(sweep cell 1: delta = -1.0\)"):
        _sweep("phase-diagram", grid="[sweep.grid]\ndelta = [0.01, -1.0]\n")
    with pytest.raises(ValueError, match="`scheme` must be one of 'adaptive', 'euler-normalize'"):
        _sweep("phase-diagram", 'scheme = "rk4"\n')


def test_an_options_object_checks_and_normalises_its_values():
    exp = EXPERIMENTS["phase-diagram"]
    o = exp.options(dim=2, betas=[1, 2])
    assert o.betas == (1.0, 2.0) and isinstance(o.betas[0], float)
    assert dataclasses.replace(o, n=8).n == 8 and o.n == 32
    with pytest.raises(ValueError, match="`n` must be an integer >= 2, got 1"):
        exp.options(n=1)
    with pytest.raises(TypeError):
        exp.function(None, not_an_option=1)
    with pytest.raises(ValueError, match="`options` must be a PhaseDiagramOptions"):
        exp.function(None, EXPERIMENTS["metastability"].options())


def test_a_field_declared_without_option_is_refused():
    plain = dataclasses.make_dataclass("Plain", [("alpha", int, dataclasses.field(default=1))], bases=(Options,))
    with pytest.raises(TypeError, match=r"Plain.alpha: declare every option with `option"):
        plain()


# -- adding an option is one edit: a new experiment, then one more field -----------------------------------
def _register(extra):
    """Register the experiment ``toy`` whose options are ``beta`` plus the fields ``extra``."""
    namespace = {"__doc__": "A toy experiment: it returns its options.", "__annotations__": {"beta": float},
                 "beta": option(1.0, "inverse temperature", low=0.0)}
    for name, (kind, field) in extra.items():
        namespace["__annotations__"][name] = kind
        namespace[name] = field
    cls = dataclasses.dataclass(type("ToyOptions", (Options,), namespace))

    @experiment("toy", cls, help="a toy experiment", parallel=False)
    def toy(out, o, *, quick, progress):
        """The options it was given."""
        return o

    return toy


def test_one_new_field_reaches_the_keyword_the_flag_and_the_sweep(capsys):
    try:
        toy = _register({"alpha": (int, option(3, "the new option", low=1))})
        assert toy(None, alpha=5).alpha == 5 and toy(None).alpha == 3          # the keyword
        with pytest.raises(ValueError, match="`alpha` must be an integer >= 1, got 0"):
            toy(None, alpha=0)
        assert _defaults("toy") == {"beta": 1.0, "alpha": 3}                   # the flag, with its help
        assert "--alpha ALPHA the new option (default 3)" in _help("toy")
        assert "A toy experiment: it returns its options." in _help("toy")
        assert main(["toy", "--alpha", "0", "--out", "never"]) == 2
        assert "--alpha: `alpha` must be an integer >= 1, got 0." in capsys.readouterr().err
        assert _sweep("toy", "alpha = 7\n").cells[0].config == {"alpha": 7}     # the sweep's TOML key
        assert _sweep("toy", grid="[sweep.grid]\nalpha = [1, 2]\n").keys == ["alpha"]
        assert "alpha : the new option" in toy.__doc__
        assert [f.name for f in fields(EXPERIMENTS["toy"].options)] == ["beta", "alpha"]
    finally:
        EXPERIMENTS.pop("toy", None)


def test_quick_values_are_declared_and_applied_by_the_registry(capsys):
    """``option(..., quick=...)``: under ``quick=True`` the registry gives the body the quick value of
    every option left at its default (a value, `FIRST`, `at_most`), keeps the ones given, and ``--help``
    shows both values."""
    from meanfield.experiments.options import EXPERIMENTS as registry, FIRST, at_most

    @dataclasses.dataclass
    class ToyOptions(Options):
        """A toy."""
        n: int = option(10, "size", low=1, quick=2)
        xs: tuple[int, ...] = option((1, 2, 3), "values", quick=FIRST)
        m: int = option(50, "steps", low=1, quick=at_most(30))
        keep: float = option(0.5, "kept")

    seen = []

    @experiment("toy-quick", ToyOptions, help="toy", parallel=False)
    def toy(out, o, *, quick, progress):
        seen.append(o)

    try:
        toy(quick=True)
        toy(quick=True, n=7, m=20)
        toy()
        assert [(o.n, o.xs, o.m, o.keep) for o in seen] == [(2, (1,), 30, 0.5), (7, (1,), 20, 0.5),
                                                            (10, (1, 2, 3), 50, 0.5)]
        fields_ = {f.name: f for f in fields(ToyOptions)}
        assert fields_["n"].shown() == "10; quick 2" and fields_["xs"].shown() == "1, 2, 3; quick the first"
        assert fields_["m"].shown() == "50; quick at most 30" and fields_["keep"].shown() == "0.5"
    finally:
        registry.pop("toy-quick")
    assert "(default 5; quick 2)" in _help("metastability")          # seeds
    assert "(default 1024; quick 128)" in _help("phase-diagram")      # realisations


@pytest.mark.parametrize("name", NAMES)
def test_no_experiment_body_tests_quick(name):
    """The body of an experiment reads its options; ``quick`` is only recorded (a value in its settings)."""
    import ast
    import textwrap

    body = EXPERIMENTS[name].function.__wrapped__
    tree = ast.parse(textwrap.dedent(inspect.getsource(body)))
    recorded = {id(v) for node in ast.walk(tree) if isinstance(node, ast.Dict) for v in node.values}
    uses = [node for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == "quick"
            and isinstance(node.ctx, ast.Load)]
    assert all(id(u) in recorded for u in uses), f"{name} tests `quick` at lines {[u.lineno for u in uses]}"
