"""The ``meanfield`` command: a thin layer over `meanfield.experiments`.

    meanfield run CONFIG.toml      one simulation from a TOML configuration (see examples/)
    meanfield verify-prop34        Proposition 3.4: coefficients, landscape, flows, discrete designs
    meanfield mean-field-limit     particles against the PDE: W1 against N, rates, Wasserstein decay
    meanfield phase-diagram        the Figure 3 phase diagram with the curve Γ of (6.9)/(6.10)
    meanfield noise-transition     the transition with noise: stationary branches, dynamics, hysteresis
    meanfield metastability        the number of clusters: k*(beta), continuum and particles, Figure 4, staircase
    meanfield sweep SWEEP.toml     a grid of runs or experiments on dask workers, resumable

Every subcommand takes ``--out DIR`` (NetCDF, PNG and summary.json go there) and ``--quick``
(reduced settings, under two minutes). Exit status: 0 when every check passes, 1 when a check
fails, 2 for bad arguments or a bad configuration, 130 when interrupted (Ctrl-C; the partial
results stay in DIR).
"""
import argparse
import pathlib
import sys
import warnings

from . import __version__


def _common(p, default_out):
    p.add_argument("--out", metavar="DIR", default=None,
                   help=f"output directory for NetCDF, PNG and summary.json (default: {default_out})")
    p.add_argument("--quick", action="store_true", help="reduced settings that finish in under two minutes")
    p.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                   help="no progress bars (default: bars when stderr is a terminal)")


def _parallel(p, default):
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help=f"run the independent parts on a local dask cluster of N processes, 0: in this process "
                        f"(default: {default})")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="the address of a running dask scheduler (tcp://host:8786) to run on instead")


def _floats(text):
    try:
        return [float(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None


def _ints(text):
    try:
        return [int(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None


def build_parser():
    parser = argparse.ArgumentParser(
        prog="meanfield",
        description="Self-attention dynamics as a mean-field PDE on the sphere: simulations and checks.",
        epilog="Exit status: 0 all checks pass, 1 a check failed, 2 bad input, 130 interrupted.")
    parser.add_argument("--version", action="version", version=f"meanfield {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="run a simulation described by a TOML file",
                       description="Run one simulation from a TOML configuration ([solver], [model], [initial], "
                                   "[times], [output]; see examples/*.toml). Writes <name>.nc (the Solution), "
                                   "<name>.png and summary.json.")
    p.add_argument("config", metavar="CONFIG.toml", help="the configuration file")
    _common(p, "meanfield-output/<name>")
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="continue the interrupted run whose checkpoint (<name>.partial.nc, or a stopped <name>.nc) is "
                        "in DIR to the configuration's end time, writing the same outputs (to DIR unless --out)")

    p = sub.add_parser("sweep", help="a grid of runs or experiments on dask workers, resumable",
                       description="Run every cell of a sweep file ([sweep] with a grid or a list of cells over the "
                                   "keys of a run configuration or an experiment's arguments; see examples/"
                                   "sweep.toml) as a task on dask.distributed. One NetCDF file per cell in "
                                   "DIR/cells; a second run skips the complete cells.")
    p.add_argument("config", metavar="SWEEP.toml", help="the sweep file")
    _common(p, "meanfield-output/<name>")
    _parallel(p, "one process per core")

    p = sub.add_parser("verify-prop34", help="check Proposition 3.4 numerically",
                       description="Proposition 3.4: the uniform measure minimises E_beta and Dirac masses maximise "
                                   "it. Four parts: Gegenbauer coefficients, energy landscape, flows, discrete "
                                   "designs.")
    _common(p, "meanfield-output/verify-prop34")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--parts", type=_ints, default=[1, 2, 3, 4], metavar="LIST",
                   help="which parts to run, e.g. 1,2,4 (default: all)")

    p = sub.add_parser("mean-field-limit", help="particles against the PDE: W1 against N and time",
                       description="W1 between N particles and the PDE solution against N (iid and quasi samples) "
                                   "and t on S^1 and S^2, fitted rates, the Dobrushin bound, and the Wasserstein "
                                   "decay to the nearest Dirac (or to uniform with --repulsive).")
    _common(p, "meanfield-output/mean-field-limit")
    _parallel(p, "in this process")
    p.add_argument("--dims", type=_ints, default=[2, 3], metavar="LIST", help="ambient dimensions, among 2 and 3")
    p.add_argument("--beta", type=float, default=1.0, help="inverse temperature (default 1)")
    p.add_argument("--usa", action="store_true", help="the unnormalised model (USA) instead of (SA)")
    p.add_argument("--repulsive", action="store_true", help="V = -I instead of V = I")
    p.add_argument("--seeds", type=int, default=None, help="iid repetitions per N (default 4, quick 2)")

    p = sub.add_parser("phase-diagram", help="the Figure 3 phase diagram with the curve Gamma",
                       description="P(<x_1(t), x_2(t)> >= 1 - delta) over a (t, beta) grid for random particles, "
                                   "with the curve Gamma of the equiangular ODE (6.9)/(6.10) overlaid.")
    _common(p, "meanfield-output/phase-diagram")
    _parallel(p, "in this process")
    p.add_argument("--dim", type=int, default=3, help="ambient dimension d (default 3)")
    p.add_argument("-n", "--particles", dest="n", type=int, default=32, help="particles per realisation (default 32)")
    p.add_argument("-B", "--realisations", type=int, default=1024, help="realisations (default 1024; quick 128)")
    p.add_argument("--delta", type=float, default=1e-3, help="clustering threshold (default 1e-3)")
    p.add_argument("--betas", type=_floats, default=None, metavar="LIST",
                   help="beta values (default 10 values 0.9 ... 9; quick 5)")
    p.add_argument("--t-end", type=float, default=30.0, help="final time (default 30)")
    p.add_argument("--n-times", type=int, default=61, help="saved times (default 61)")
    p.add_argument("--usa", action="store_true", help="(USA) instead of (SA)")
    p.add_argument("--scheme", choices=["adaptive", "euler-normalize"], default="adaptive",
                   help="particle time stepping (default adaptive)")
    p.add_argument("--dt", type=float, default=0.1, help="step of --scheme euler-normalize (default 0.1)")
    p.add_argument("--no-clusters", dest="clusters", action="store_false", help="do not count clusters")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")

    p = sub.add_parser("noise-transition", help="the phase transition with noise: branches, dynamics, hysteresis",
                       description="Stationary states of the noisy dynamics on S^1 and S^2: the bifurcation diagram "
                                   "r(nu) (stable solid, unstable dashed) from the self-consistency equation, the "
                                   "Landau classification (continuous below beta_*, discontinuous above), noisy PDE "
                                   "and particle runs overlaid, hysteresis sweeps, and (SA) with its linear threshold.")
    _common(p, "meanfield-output/noise-transition")
    _parallel(p, "in this process")
    p.add_argument("--dims", type=_ints, default=[2, 3], metavar="LIST", help="ambient dimensions, among 2 and 3")
    p.add_argument("--betas", type=_floats, default=None, metavar="LIST",
                   help="beta values on every sphere (default: --factors times beta_*(d))")
    p.add_argument("--factors", type=_floats, default=[0.5, 2.0], metavar="LIST",
                   help="multiples of beta_*(d) used without --betas (default 0.5, 2)")
    p.add_argument("--nus", type=_floats, default=None, metavar="LIST",
                   help="nu/nu_c at which the dynamics run (default: chosen from each branch)")
    p.add_argument("--no-sa", dest="sa", action="store_false", help="skip the (SA) dynamics")
    p.add_argument("--no-particles", dest="particles", action="store_false", help="skip the particle runs")
    p.add_argument("-n", "--particles", dest="n_particles", type=int, default=None,
                   help="particles per run (default 500; quick 250)")
    p.add_argument("--tau", type=float, default=None, help="longest run in units of 1/nu_c (default 40; quick 20)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")

    p = sub.add_parser("metastability", help="the number of clusters: prediction, continuum, particles, Figure 4",
                       description="Metastability (Figure 4, Problem 1): the fastest linear degree k*(beta) against "
                                   "the first cluster count of the continuum (Lagrangian solver) and of particles "
                                   "(quasi and iid samples) from a seeded near-uniform density on S^1 and S^2, the "
                                   "merge times, the mean number of clusters over (t, beta), and the n = 5, "
                                   "beta = 4 energy staircase on the circle.")
    _common(p, "meanfield-output/metastability")
    _parallel(p, "in this process")
    p.add_argument("--dims", type=_ints, default=[2, 3], metavar="LIST", help="ambient dimensions, among 2 and 3")
    p.add_argument("--betas-circle", type=_floats, default=[2.0, 4.0, 8.0], metavar="LIST",
                   help="beta values on S^1 (default 2, 4, 8)")
    p.add_argument("--betas-sphere", type=_floats, default=[3.0], metavar="LIST", help="beta values on S^2 (default 3)")
    p.add_argument("--epsilon", type=float, default=1e-4, help="amplitude of each seeded degree (default 1e-4)")
    p.add_argument("--degrees", type=int, default=8, help="seeded degrees 1..L (default 8)")
    p.add_argument("--seeds", type=int, default=5, help="seeds per beta (default 5; quick 2)")
    p.add_argument("--t-end", type=float, default=200.0, help="last time on S^1 (default 200)")
    p.add_argument("--tol", type=float, default=1e-3, help="cluster tolerance in radians (default 1e-3)")
    p.add_argument("--quasi-ns", type=_ints, default=[250, 1000, 4000], metavar="LIST",
                   help="particle numbers of the quasi samples (default 250, 1000, 4000)")
    p.add_argument("--iid-ns", type=_ints, default=[64, 256, 1024], metavar="LIST",
                   help="particle numbers of the iid samples (default 64, 256, 1024)")
    p.add_argument("--iid-seeds", type=int, default=32, help="iid realisations per n (default 32)")
    p.add_argument("--figure4-betas", type=_floats, default=None, metavar="LIST",
                   help="beta values of the Figure 4 grid (default 1, 2, 3, 4, 5, 6, 8, 10)")
    return parser


def _dispatch(args):
    from . import experiments

    out = args.out
    if args.command == "run":
        cfg = experiments.load_config(args.config)
        out = out or args.resume or cfg.out_dir or str(pathlib.Path("meanfield-output") / cfg.name)
        args.out = out
        return experiments.run(cfg, out, quick=args.quick, progress=args.progress, resume=args.resume)
    if args.command == "sweep":
        import importlib

        sweep = importlib.import_module("meanfield.experiments.sweep")
        spec = sweep.load_sweep(args.config)
        args.out = out or str(pathlib.Path("meanfield-output") / spec.name)
        return sweep.sweep(spec, args.out, workers=args.workers, scheduler=args.scheduler, quick=args.quick,
                           progress=args.progress)
    out = out or str(pathlib.Path("meanfield-output") / args.command)
    args.out = out
    if args.command == "verify-prop34":
        return experiments.verify_prop34(out, quick=args.quick, progress=args.progress, seed=args.seed,
                                         parts=tuple(args.parts))
    if args.command == "mean-field-limit":
        return experiments.mean_field_limit(out, dims=tuple(args.dims), beta=args.beta, normalized=not args.usa,
                                            V=-1.0 if args.repulsive else 1.0, seeds=args.seeds, quick=args.quick,
                                            progress=args.progress, workers=args.workers, scheduler=args.scheduler)
    if args.command == "phase-diagram":
        return experiments.phase_diagram(out, dim=args.dim, n=args.n, betas=args.betas, t_end=args.t_end,
                                         n_times=args.n_times, realisations=args.realisations, delta=args.delta,
                                         normalized=not args.usa, scheme=args.scheme, dt=args.dt,
                                         clusters=args.clusters, seed=args.seed, quick=args.quick,
                                         progress=args.progress, workers=args.workers, scheduler=args.scheduler)
    if args.command == "noise-transition":
        return experiments.noise_transition(out, dims=tuple(args.dims), betas=args.betas, factors=args.factors,
                                            nus=args.nus, sa=args.sa, particles=args.particles,
                                            n_particles=args.n_particles, tau=args.tau, quick=args.quick,
                                            seed=args.seed, progress=args.progress, workers=args.workers,
                                            scheduler=args.scheduler)
    if args.command == "metastability":
        return experiments.metastability(out, dims=tuple(args.dims), betas_circle=args.betas_circle,
                                         betas_sphere=args.betas_sphere, epsilon=args.epsilon, degrees=args.degrees,
                                         seeds=args.seeds, t_end=args.t_end, tol=args.tol, quasi_ns=args.quasi_ns,
                                         iid_ns=args.iid_ns, iid_seeds=args.iid_seeds,
                                         figure4_betas=args.figure4_betas, quick=args.quick, progress=args.progress,
                                         workers=args.workers, scheduler=args.scheduler)
    raise AssertionError(args.command)  # pragma: no cover


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        with warnings.catch_warnings():
            # NaN and overflow are reported by the solvers (NonFiniteState) and the checks: numpy's own
            # floating-point warnings would only repeat them
            warnings.filterwarnings("ignore", r"(overflow|invalid value|divide by zero|underflow) encountered",
                                    RuntimeWarning)
            report = _dispatch(args)
    except KeyboardInterrupt:
        print(f"meanfield {args.command}: interrupted; partial results are in {args.out}", file=sys.stderr)
        return 130
    except ValueError as exc:       # bad input (UnsupportedModel included): one line, no traceback
        print(f"meanfield {args.command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    n_fail = sum(not c["passed"] for c in report.checks)
    verdict = "" if report.passed else " — FAILED"
    print(f"{len(report.checks) - n_fail}/{len(report.checks)} checks passed{verdict}")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
