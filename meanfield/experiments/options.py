"""The experiment registry: every experiment declares its options once, as a dataclass of `option` fields.

Each field carries its type (the annotation), its default, its help text, and the values it accepts
(``choices``, or a range ``low``/``high``). From that one declaration come

* the keyword arguments of the experiment function (`experiment` builds its signature, checks the
  values and hands the body one options object);
* the flags of its ``meanfield`` subcommand (`meanfield.cli` reads `EXPERIMENTS`);
* the keys a sweep accepts in ``[parameters]`` and ``[sweep.grid]`` (`meanfield.experiments.sweep`).

Adding a field to an options class is the whole change: the function, the command line and the
sweep files accept it at once. The types are ``bool``, ``int``, ``float``, ``str`` (with ``choices``),
``tuple[int, ...]`` and ``tuple[float, ...]`` (on the command line: values separated by commas), each
possibly ``| None``, and ``dict`` (a table: sweep files and Python only). A bad value raises
ValueError naming the option in backticks and what it accepts.

An option may also declare its value under ``--quick`` (``quick=``: a value, or a `Quick` computed from
the value, such as `FIRST`): the registry applies it to every option left at its default when the
experiment runs with ``quick=True``, and ``--help`` shows both values. An experiment's body reads
its options only; it never tests ``quick``.
"""
import dataclasses
import functools
import inspect
import textwrap
import types
import typing

import numpy as np

from ..threads import use_threads
from ..validation import check_int, check_real
from ..errors import InvalidInput



@dataclasses.dataclass(frozen=True)
class Quick:
    """A value under ``--quick`` computed from the option's value: ``of(value)``; ``text`` says how (help)."""

    text: str
    of: typing.Callable


FIRST = Quick("the first", lambda values: values[:1])


def at_most(limit):
    """The quick value min(value, ``limit``)."""
    return Quick(f"at most {_show(limit)}", lambda value: min(value, limit))


# arguments every experiment takes that are not options: how it runs, not what it computes
RUN_ARGUMENTS = ("quick", "progress")
PARALLEL_ARGUMENTS = ("workers", "scheduler")


@dataclasses.dataclass(frozen=True)
class Option:
    """What an options field accepts and how the command line spells it (see `option`)."""

    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple | None = None
    nonempty: bool = True
    flags: tuple = ()
    const: object = None
    flag_help: str | None = None
    shown: str | None = None
    quick: object = None


def option(default, help, *, low=None, high=None, low_open=False, choices=None, nonempty=True, flags=(), const=None,
           flag_help=None, shown=None, quick=None):
    """A field of an experiment's options.

    Parameters
    ----------
    default : the value when the option is not given (immutable: a tuple for a list of values).
    help : what the option sets, one line (the flag's help, the sweep key's and the docstring's).
    low, high, low_open : the accepted range of a number, or of every element of a tuple
        (``low_open``: ``low`` itself excluded).
    choices : the accepted values (of a ``str``, or of every element of a tuple).
    nonempty : a tuple must hold at least one value.
    flags : the command-line spelling (default ``--name`` with ``_`` as ``-``; ``("-n", "--particles")``).
        A ``bool`` option with flags gets one flag that sets the opposite of the default
        (``--no-clusters``); without flags, ``--name`` and ``--no-name``.
    const : a flag without a value that sets the option to ``const`` (``--repulsive``: ``V = -1``).
    flag_help : the flag's help when it differs from ``help`` (a flag that sets the opposite).
    shown : how ``--help`` shows the default (when it is None, e.g. "none: one layer").
    quick : the value under ``--quick`` (None: the default), or a `Quick` computed from the value;
        the registry applies it when the option is left at its default.
    """
    meta = Option(help, low, high, low_open, None if choices is None else tuple(choices), nonempty, tuple(flags),
                  const, flag_help, shown, quick)
    return dataclasses.field(default=default, metadata={"option": meta})


def _base(annotation):
    """(type, optional) of an annotation: ``tuple[float, ...] | None`` -> (tuple[float, ...], True)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(annotation))
    return annotation, False


@dataclasses.dataclass(frozen=True)
class Field:
    """One option of an experiment, as the registry sees it: name, type, default and `Option`."""

    name: str
    kind: object            # bool, int, float, str, dict or tuple[int, ...] / tuple[float, ...]
    optional: bool
    default: object
    spec: Option

    @property
    def element(self):
        """The type of a value, or of each element of a tuple."""
        return typing.get_args(self.kind)[0] if typing.get_origin(self.kind) is tuple else self.kind

    @property
    def is_sequence(self):
        return typing.get_origin(self.kind) is tuple

    @property
    def flags(self):
        """The command-line flags; () for a table (``dict``), which only sweep files and Python give."""
        if self.kind is dict:
            return ()
        if self.spec.flags:
            return self.spec.flags
        return (f"--{self.name.replace('_', '-')}",)

    def accepted(self):
        """What the option accepts, in words (for messages and help): "an integer >= 2", "one of 2, 3", ..."""
        s = self.spec
        noun = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a table"}
        if s.choices is not None:
            text = "one of " + ", ".join(map(repr, s.choices))
        else:
            bounds = ([f"{'>' if s.low_open else '>='} {s.low:g}"] if s.low is not None else []) + \
                     ([f"<= {s.high:g}"] if s.high is not None else [])
            text = " ".join([noun[self.element], " and ".join(bounds)]).strip()
        if self.is_sequence:
            text = f"{'a non-empty' if s.nonempty else 'a'} list of values, each {text}"
        return text + (" (or none)" if self.optional else "")

    def check(self, value):
        """The value, checked and normalised (a tuple for a list); ValueError naming the option otherwise."""
        if value is None:
            if self.optional:
                return None
            raise InvalidInput(f"`{self.name}` must be {self.accepted()}, got None.")
        if self.kind is dict:
            if not isinstance(value, dict):
                raise InvalidInput(f"`{self.name}` must be a table, got {value!r}.")
            return value
        if not self.is_sequence:
            return self._one(value)
        if isinstance(value, (str, dict)):
            raise InvalidInput(f"`{self.name}` must be {self.accepted()}, got {value!r}.")
        values = tuple(self._one(v) for v in np.atleast_1d(np.asarray(value, dtype=object)))
        if self.spec.nonempty and not values:
            raise InvalidInput(f"`{self.name}` must be {self.accepted()}, got none.")
        return values

    def _one(self, value):
        """One value (or one element of a tuple), checked; the message says all the option accepts."""
        s, kind = self.spec, self.element
        try:
            if kind is bool:
                if not isinstance(value, (bool, np.bool_)):
                    raise ValueError
                value = bool(value)
            elif kind is str:
                if not isinstance(value, str):
                    raise ValueError
            elif kind is int:
                value = check_int(value, self.name, low=s.low, high=s.high)
            else:
                value = check_real(value, self.name, low=s.low, high=s.high, low_open=s.low_open)
            if s.choices is not None and value not in s.choices:
                raise ValueError
        except ValueError:
            raise InvalidInput(f"`{self.name}` must be {self.accepted()}, got {value!r}.") from None
        return value

    def help_text(self):
        """The flag's help: ``help`` (or ``flag_help``) with the default and the ``--quick`` value."""
        s = self.spec
        if s.const is not None or (self.kind is bool and s.flags):
            return s.flag_help or s.help
        return f"{s.help} (default {self.shown()})"

    def shown(self):
        """The default in words, with the value under ``--quick`` when it differs."""
        s = self.spec
        q = s.quick.text if isinstance(s.quick, Quick) else _show(s.quick)
        quick = f"; quick {q}" if s.quick is not None else ""
        return (s.shown if s.shown is not None else _show(self.default)) + quick

    def quick_value(self, value):
        """The value under ``--quick`` of an option left at ``value`` (its default)."""
        q = self.spec.quick
        return value if q is None else self.check(q.of(value) if isinstance(q, Quick) else q)


def _show(value):
    """A default as ``--help`` shows it: 0.001, "2, 3", none."""
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return ", ".join(_show(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class Options:
    """The base of an experiment's options dataclass: every field is checked when the object is made
    (`Field.check`), so that an options object always holds accepted values."""

    def __post_init__(self):
        for f in fields(type(self)):
            object.__setattr__(self, f.name, f.check(getattr(self, f.name)))

    def quick(self):
        """The options under ``--quick``: each option left at its default takes its declared quick value."""
        return dataclasses.replace(self, **{f.name: f.quick_value(f.default) for f in fields(type(self))
                                            if f.spec.quick is not None and getattr(self, f.name) == f.default})


@functools.cache
def fields(options):
    """The `Field` of every option of an options class, in declaration order."""
    hints = typing.get_type_hints(options)
    out = []
    for f in dataclasses.fields(options):
        if "option" not in f.metadata:
            raise TypeError(f"{options.__name__}.{f.name}: declare every option with `option(default, help, ...)`.")
        kind, optional = _base(hints[f.name])
        out.append(Field(f.name, kind, optional, f.default, f.metadata["option"]))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One registered experiment: the ``meanfield`` subcommand ``name``, its function, its options
    class, the help of its subcommand, the NetCDF file a sweep cell keeps (``writes``), and whether
    it runs tasks on dask workers (``parallel``: ``--workers``/``--scheduler``)."""

    name: str
    function: typing.Callable
    options: type
    help: str
    description: str
    writes: str | None = None
    parallel: bool = True

    @property
    def fields(self):
        return fields(self.options)

    @property
    def keys(self):
        """The option names: the keyword arguments, the sweep's keys."""
        return tuple(f.name for f in self.fields)


EXPERIMENTS = {}        # subcommand name -> Experiment, in the order of the ``meanfield`` help


def experiment(name, options, *, help, writes=None, parallel=True):
    """Register ``body(out, options, *, quick, progress[, workers, scheduler])`` as the experiment ``name``.

    ``help`` is the subcommand's line in ``meanfield --help``; the first paragraph of the options
    class's docstring is its description in ``meanfield <name> --help``.

    Returns the public function ``f(out=None, options=None, *, <every option>, quick=False,
    progress=None[, workers=None, scheduler=None], threads=None)``: the options given as keywords replace
    those of ``options`` (default: the declared defaults), are checked, and reach the body as one
    ``options`` object; the body runs inside ``use_threads(threads)`` (`meanfield.threads`: the threads
    of every solver and distance it builds). The function's docstring lists the options after the body's.
    """
    P = inspect.Parameter
    opts = fields(options)
    run_args = RUN_ARGUMENTS + (PARALLEL_ARGUMENTS if parallel else ())
    defaults = {"quick": False, "progress": None, "workers": None, "scheduler": None}
    signature = inspect.Signature(
        [P("out", P.POSITIONAL_OR_KEYWORD, default=None), P("options", P.POSITIONAL_OR_KEYWORD, default=None)]
        + [P(f.name, P.KEYWORD_ONLY, default=f.default) for f in opts]
        + [P(a, P.KEYWORD_ONLY, default=defaults[a]) for a in run_args]
        + [P("threads", P.KEYWORD_ONLY, default=None)])
    listing = "\n".join(textwrap.fill(f"{f.name} : {f.spec.help}; {f.accepted()} (default {f.shown()}).", 100,
                                       initial_indent="    ", subsequent_indent="        ") for f in opts)

    def register(body):
        @functools.wraps(body)
        def function(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            given = dict(bound.arguments)
            out, chosen = given.pop("out", None), given.pop("options", None)
            run = {a: given.pop(a, defaults[a]) for a in run_args}
            threads = given.pop("threads", None)
            if chosen is None:
                chosen = options(**given)
            elif not isinstance(chosen, options):
                raise InvalidInput(f"`options` must be a {options.__name__}, got {type(chosen).__name__}.")
            elif given:
                chosen = dataclasses.replace(chosen, **given)
            with use_threads(threads):
                return body(out, chosen.quick() if run["quick"] else chosen, **run)

        function.__signature__ = signature
        function.__doc__ = f"{inspect.cleandoc(body.__doc__ or '')}\n\nOptions ({options.__name__})\n" \
                           f"-------\n{listing}\n"
        description = " ".join(inspect.cleandoc(options.__doc__).split("\n\n")[0].split())
        EXPERIMENTS[name] = Experiment(name, function, options, help, description, writes, parallel)
        return function

    return register


def lookup(name, where="experiment"):
    """The registered `Experiment` called ``name`` (a ``meanfield`` subcommand)."""
    if name not in EXPERIMENTS:
        raise InvalidInput(f"`{where}`={name!r} is not an experiment; accepted: {', '.join(EXPERIMENTS)}.")
    return EXPERIMENTS[name]
