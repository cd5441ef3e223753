"""The ``meanfield`` command: a thin layer over `meanfield.experiments`.

    meanfield run CONFIG.toml      one simulation from a TOML configuration (see examples/)
    meanfield verify-prop34        Proposition 3.4: coefficients, landscape, flows, discrete designs
    meanfield mean-field-limit     particles against the PDE: W1 against N, rates, Wasserstein decay
    meanfield phase-diagram        the Figure 3 phase diagram with the curve Γ of (6.9)/(6.10)
    meanfield noise-transition     the transition with noise: stationary branches, dynamics, hysteresis
    meanfield metastability        the number of clusters: k*(beta), continuum and particles, Figure 4, staircase
    meanfield fluctuations         n tokens about the mean field: ensembles, linear theory, BBGKY closure
    meanfield hardmax-limit        softmax against its hardmax limit: sup-distance, exit times, Frank-Wolfe cells
    meanfield sweep SWEEP.toml     a grid of runs or experiments on dask workers, resumable
    meanfield animate FILE.nc      a movie (GIF or MP4) of a saved Solution

Every subcommand takes ``--out DIR`` (NetCDF, PNG and summary.json go there) and ``--quick``
(reduced settings, under two minutes). The flags of an experiment are made from its options
(`meanfield.experiments.options`): the spelling, type, default, accepted values and help of each. Exit status: 0 when every check passes, 1 when a check
fails or the run itself fails (an error inside it: the traceback and a one-line message, the partial
results stay in DIR and summary.json says "failed"), 2 for bad arguments or a bad configuration
(`meanfield.errors.InvalidInput`), 130 when interrupted (Ctrl-C; the partial results stay in DIR).
"""
import argparse
import gc
import pathlib
import re
import sys
import traceback
import warnings
import importlib

from .version import __version__
from . import experiments
from .experiments import EXPERIMENTS
from .results.movies import animate
from .results.solution import load
from .threads import blas_threads, use_threads
from .errors import InvalidInput


def _common(p, default_out):
    p.add_argument("--out", metavar="DIR", default=None,
                   help=f"output directory for NetCDF, PNG and summary.json (default: {default_out})")
    p.add_argument("--quick", action="store_true", help="reduced settings that finish in under two minutes")
    p.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                   help="no progress bars (default: bars when stderr is a terminal)")


def _threads(p):
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="threads of every solver and distance in this process (default: MEANFIELD_THREADS, else "
                        "OMP_NUM_THREADS, else the CPUs; see meanfield.threads)")


def _parallel(p, default):
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help=f"run the independent parts on a local dask cluster of N processes, 0: in this process "
                        f"(default: {default})")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="the address of a running dask scheduler (tcp://host:8786) to run on instead")


def _items(text, kind, what):
    """The comma-separated (or space-separated) items of ``text`` as ``kind``; an empty item is an error.
    A range: ``3..12`` (integers, every value) or ``-6:2`` (its two ends, for an option that reads a pair
    as a range)."""
    ends = re.fullmatch(r"\s*(-?[0-9.]+)\s*(\.\.|:)\s*(-?[0-9.]+)\s*", text)
    if ends and ends[2] == ".." and kind is int and ends[1].lstrip("-").isdigit() and ends[3].lstrip("-").isdigit():
        return list(range(int(ends[1]), int(ends[3]) + 1))
    if ends and ends[2] == ":":
        text = f"{ends[1]},{ends[3]}"
    parts = [v.strip() for v in text.split(",")] if "," in text else (text.split() or [""])
    try:
        if "" in parts:
            raise ValueError
        return [kind(v) for v in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what} separated by commas (no empty item), got {text!r}") from None


def _floats(text):
    return _items(text, float, "numbers")


def _ints(text):
    return _items(text, int, "integers")


_NUMBER_LIST = re.compile(r"^-[0-9.]")


def _join_negative_lists(argv):
    """``--betas -1,2`` as ``--betas=-1,2``: argparse takes a word starting with '-' for a flag unless
    it is one plain negative number, so the next word of a list option that starts with '-' and a
    digit is joined to it as its value."""

    list_flags = {flag for exp in EXPERIMENTS.values() for f in exp.fields if f.flags and f.is_sequence
                  for flag in f.flags}
    out = []
    for word in argv:
        if out and out[-1] in list_flags and _NUMBER_LIST.match(word):
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


def _option(p, f):
    """The flag of one experiment option (`meanfield.experiments.options.Field`): its spelling, type,
    default, accepted values and help all come from the option's declaration."""
    kw = {"dest": f.name, "default": f.default, "help": f.help_text().replace("%", "%%")}
    if f.spec.const is not None:
        p.add_argument(*f.flags, action="store_const", const=f.spec.const, **kw)
    elif f.kind is bool:
        if f.spec.flags:                          # one flag: the opposite of the default (--no-clusters, --usa)
            p.add_argument(*f.flags, action="store_const", const=not f.default, **kw)
        else:
            p.add_argument(*f.flags, action=argparse.BooleanOptionalAction, **kw)
    elif f.is_sequence:
        p.add_argument(*f.flags, type=_ints if f.element is int else _floats, metavar="LIST", **kw)
    else:
        p.add_argument(*f.flags, type=f.element, choices=f.spec.choices, **kw)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``meanfield COMMAND: error: ...`` and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser():
    parser = _Parser(
        prog="meanfield",
        description="Self-attention dynamics as a mean-field PDE on the sphere: simulations and checks.",
        epilog="Exit status: 0 all checks pass, 1 a check or the run failed, 2 bad input, 130 interrupted.")
    parser.add_argument("--version", action="version", version=f"meanfield {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="run a simulation described by a TOML file",
                       description="Run one simulation from a TOML configuration ([solver], [model], [initial], "
                                   "[times], [output]; see examples/*.toml). Writes <name>.nc (the Solution), "
                                   "<name>.png and summary.json.")
    p.add_argument("config", metavar="CONFIG.toml", help="the configuration file")
    _common(p, "meanfield-output/<name>")
    _threads(p)
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="continue the interrupted run whose checkpoint (<name>.partial.nc, or a stopped <name>.nc) is "
                        "in DIR to the configuration's end time, writing the same outputs (to DIR unless --out)")
    p.add_argument("--movie", nargs="?", const="gif", choices=("gif", "mp4"), default=None,
                   help="also write a movie of the run, <name>.gif (default) or <name>.mp4 (meanfield.results.movies)")

    p = sub.add_parser("animate", help="a movie (GIF or MP4) of a saved Solution",
                       description="Draw a saved Solution (particles or a density on S^1 or S^2) frame by frame "
                                   "into an animated GIF (Pillow) or an MP4 (ffmpeg); see meanfield.results.movies.")
    p.add_argument("file", metavar="FILE.nc", help="a Solution saved by Solution.save or meanfield run")
    p.add_argument("--out", metavar="PATH", default=None, help="the movie, .gif or .mp4 (default: FILE.gif)")
    p.add_argument("--compare", metavar="OTHER.nc", default=None,
                   help="a second Solution drawn beside it at the nearest saved times (particles against the continuum)")
    p.add_argument("--fps", type=float, default=10.0, help="frames per second (default: 10)")
    p.add_argument("--max-frames", dest="max_frames", type=int, default=200,
                   help="at most this many frames, evenly spread over the saved times (default: 200)")
    p.add_argument("--no-progress", dest="progress", action="store_false", default=None, help="no progress bar")

    p = sub.add_parser("sweep", help="a grid of runs or experiments on dask workers, resumable",
                       description="Run every cell of a sweep file ([sweep] with a grid or a list of cells over the "
                                   "keys of a run configuration or an experiment's arguments; see examples/"
                                   "sweep.toml) as a task on dask.distributed. One NetCDF file per cell in "
                                   "DIR/cells; a second run skips the complete cells.")
    p.add_argument("config", metavar="SWEEP.toml", help="the sweep file")
    _common(p, "meanfield-output/<name>")
    _parallel(p, "one process per core")


    for exp in EXPERIMENTS.values():
        p = sub.add_parser(exp.name, help=exp.help, description=exp.description)
        _common(p, f"meanfield-output/{exp.name}")
        _threads(p)
        if exp.parallel:
            _parallel(p, "in this process")
        for f in exp.fields:
            if f.flags:
                _option(p, f)
    return parser


def _dispatch(args):
    out = args.out
    if args.command == "run":
        cfg = experiments.load_config(args.config)
        out = out or args.resume or cfg.out_dir or str(pathlib.Path("meanfield-output") / cfg.name)
        args.out = out
        return experiments.run(cfg, out, quick=args.quick, progress=args.progress, resume=args.resume,
                               movie=args.movie)
    if args.command == "animate":
        return _animate(args)
    if args.command == "sweep":
        sweep = importlib.import_module("meanfield.experiments.sweep")
        spec = sweep.load_sweep(args.config)
        args.out = out or str(pathlib.Path("meanfield-output") / spec.name)
        return sweep.sweep(spec, args.out, workers=args.workers, scheduler=args.scheduler, quick=args.quick,
                           progress=args.progress)
    out = out or str(pathlib.Path("meanfield-output") / args.command)
    args.out = out
    exp = experiments.EXPERIMENTS[args.command]
    options = {}
    for f in exp.fields:
        if f.flags:
            try:
                options[f.name] = f.check(getattr(args, f.name))
            except ValueError as exc:
                raise InvalidInput(f"{'/'.join(f.flags)}: {exc}") from None
    run = {"quick": args.quick, "progress": args.progress}
    if exp.parallel:
        run.update(workers=args.workers, scheduler=args.scheduler)
    return exp.function(out, exp.options(**options), **run)


def _animate(args):
    """``meanfield animate FILE.nc``: the movie, and a one-line report of it."""

    def read(path, name):
        if not pathlib.Path(path).is_file():
            raise InvalidInput(f"`{name}`: there is no file {path!r}.")
        return load(path)

    sol = read(args.file, "file")
    other = None if args.compare is None else read(args.compare, "compare")
    args.out = args.out or str(pathlib.Path(args.file).with_suffix(".gif"))
    made = animate(sol, args.out, compare=other, fps=args.fps, max_frames=args.max_frames, progress=args.progress)
    return _Done(f"animate: wrote {made['path']}: {made['frames']} frames, t in [{made['times'][0]:g}, "
                 f"{made['times'][-1]:g}], {made['writer']}")


class _Done:
    """The report of a command without checks: its lines, passed."""

    def __init__(self, line):
        self.line, self.checks, self.passed = line, [], True

    def lines(self):
        return [self.line]


def main(argv=None):
    """The ``meanfield`` command: its exit status. Called as the command (``argv`` None), it freezes the
    objects it leaves before the process ends (`gc.freeze`): the interpreter's last collections would
    otherwise walk every object of numba, scipy, xarray and matplotlib again, 0.5 s at each exit."""
    try:
        return _main(argv)
    finally:
        if argv is None:
            gc.freeze()


def _main(argv):
    parser = build_parser()
    args = parser.parse_args(_join_negative_lists(sys.argv[1:] if argv is None else argv))
    if args.command is None:
        parser.print_help()
        return 0
    try:
        with warnings.catch_warnings():
            # NaN and overflow are reported by the solvers (NonFiniteState) and the checks: numpy's own
            # floating-point warnings would only repeat them
            warnings.filterwarnings("ignore", r"(overflow|invalid value|divide by zero|underflow) encountered",
                                    RuntimeWarning)
            threads = getattr(args, "threads", None)
            with use_threads(threads), blas_threads(threads):
                report = _dispatch(args)
    except KeyboardInterrupt as exc:
        said = " ".join(str(exc).split())
        where = getattr(args, "out", None)          # a Ctrl-C inside a solver says where it stopped, too
        print(f"meanfield {args.command}: {said or 'interrupted'}" + (f"; partial results are in {where}" if where
                                                                       else ""), file=sys.stderr)
        return 130
    except InvalidInput as exc:     # bad input (UnsupportedModel included): one line, no traceback
        print(f"meanfield {args.command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except OSError as exc:          # an output directory that cannot be written, a file that cannot be read
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"meanfield {args.command}: error: {exc.strerror or exc}{where}; check `--out` and the paths given",
              file=sys.stderr)
        return 2
    except Exception as exc:        # an error inside the run: not bad input; the traceback, then one line
        traceback.print_exc(file=sys.stderr)
        where = getattr(args, "out", None)
        print(f"meanfield {args.command}: failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
              + (f"; partial results are in {where}" if where else ""), file=sys.stderr)
        return 1
    print("\n".join(report.lines()))
    if not report.checks:
        return 0
    n_fail = sum(not c["passed"] for c in report.checks)
    verdict = "" if report.passed else " — FAILED"
    print(f"{len(report.checks) - n_fail}/{len(report.checks)} checks passed{verdict}")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
