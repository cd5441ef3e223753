"""The Figure 3 particle workload against the exp floor, its peak memory, and the adaptive run.

    python benchmarks/bench_phase_diagram.py [--threads 1,2] [--workers 2] [--betas K] [--adaptive] [--energy] [--repeat R]
    python benchmarks/bench_phase_diagram.py --cli [--repeat R] [--qk gaussian --v wishart]
    python benchmarks/bench_phase_diagram.py --lag [-B 1024]

``--cli`` times the command as users run it, in a subprocess with OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = 1
(interpreter start, imports, Γ, the equiangular check, the file and the picture included):

    meanfield phase-diagram --dim 3 -n 32 -B 1024 --betas 0.5,1,...,8 --t-end 30 --n-times 201
        --scheme euler-normalize --dt 0.1 --no-clusters

and prints its wall time over 4800 × the exp floor, the floor measured in this process before and after
(target <= 4), with p_d(30, β) to three decimals. ``--qk``/``--v`` add random parameters (Figure 5).

The workload of the paper's Figure 3 (`meanfield.experiments.phase_diagram`): (SA), d = 3, n = 32
particles, B = 1024 realisations, 16 values of β from 0.5 to 8, t ∈ [0, 30] with the authors'
Euler-then-normalise step dt = 0.1 (300 steps, 4800 in all), the clustered-pair fraction
(δ = 1e-3) at 201 saved times on the step's grid (t = 0.1·round(1.5 k)), ``save="diagnostics"`` (what the phase diagram keeps). ``--energy``
records the energy E_β at every saved time as well (free with euler-normalize: it comes from the
denominators of the step's sums; one more evaluation per saved time between adaptive steps).

Each configuration runs in a fresh subprocess (so that its peak resident memory, ru_maxrss, is its
own) with ``OMP_NUM_THREADS`` set to the thread count (the kernel sums' threads) and BLAS on one
thread (OPENBLAS_NUM_THREADS=1: OpenBLAS threads on top of them would oversubscribe two cores, and
they spin while they wait), and prints

* ratio = wall time / (4800 × the exp floor), the exp floor being ``np.exp`` over B·n² = 2^20
  float64 measured in the same subprocess before and after the run (minimum; ``np.exp`` runs on
  one thread whatever OMP_NUM_THREADS, so it is the single-thread floor in every configuration);
  targets: <= 4 with one thread, <= 2.5 with two;
* the CPU time of the run and its ratio (on a loaded machine the wall time also counts the time the
  process waits for a core; the CPU time does not);
* the peak memory (target <= 0.5 GB, interpreter and libraries included);
* with ``--adaptive``: the same workload with dopri5 at rtol 1e-6, atol 1e-9 (the phase diagram's
  default scheme), ``dense_output=True``, against the euler run of the same subprocess
  (target <= 2×), and the number of right-hand sides.

``--workers W`` adds the same workload with its β runs as tasks on a local dask cluster of W
single-threaded worker processes (`meanfield.experiments.sweep.map_tasks`, what ``meanfield
phase-diagram --workers W`` does), timed from the cluster's start to the last result; its ratio is
counted against the same single-thread floor (target <= 2.5 on two cores).

``--lag`` prints, instead, how far the authors' step lags the ODE on this workload: for each β, the
time t_1/2 at which p_d(t, β) reaches 1/2 and max_t |p_d − p_d^ODE| for euler-normalize with dt = 0.1,
0.05, 0.025 and for dopri5 at rtol 1e-6, the ODE being dopri5 at rtol 1e-9 (docs/particles.md).

``--betas K`` runs K of the 16 values of β (spread over [0.5, 8]) and scales the time by 16/K
(quick look; the acceptance figures are for 16). The machine may be shared: ``uptime`` is printed
before and after; repeat at a quiet moment. For its own subprocesses the benchmark unsets
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (OpenBLAS then detects the CPU itself); tests never do.
"""
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

B, N, D = 1024, 32, 3
BETAS = np.linspace(0.5, 8.0, 16)
# 201 saved times on the grid of the step dt = 0.1, so that the run is exactly 300 steps of 0.1 (saved
# times off the grid, as linspace(0, 30, 201), would shorten the steps that land on them: 400 steps)
T_EVAL = 0.1 * np.round(np.linspace(0.0, 300.0, 201))
STEPS = 300 * BETAS.size


def _floor(a, repeat=15):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        np.exp(a)
        best = min(best, time.perf_counter() - t0)
    return best


def _beta_run(beta, *, x0, threads, scheme, names):
    """One β of the workload: (wall time of the solve, RHS evaluations, p_d at t = 30)."""
    import meanfield as mf
    import solvers

    kw = {"dt": 0.1} if scheme == "euler-normalize" else {"rtol": 1e-6, "atol": 1e-9, "dense_output": True}
    method = "euler-normalize" if scheme == "euler-normalize" else "dopri5"
    solver = solvers.Particles(mf.Model(beta=float(beta), dim=D), delta=1e-3, diagnostics=names)
    t0 = time.perf_counter()
    sol = solver.solve(x0, T_EVAL, method=method, save="diagnostics", threads=threads, progress=False, **kw)
    return time.perf_counter() - t0, sol.stats["nfev"], float(np.mean(sol.diagnostics["clustered_fraction"][-1]))


def _workload(betas, threads, scheme, names, workers=0):
    """The β runs one after the other on ``threads`` threads, or (``workers`` > 0) as tasks on a local
    dask cluster of that many single-threaded worker processes, started inside the timing."""
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((B, N, D))
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    shared = dict(x0=x0, threads=threads, scheme=scheme, names=names)
    cpu0 = _cpu()
    if workers:
        from meanfield.experiments.parallel import map_tasks

        t0 = time.perf_counter()
        runs = map_tasks(_beta_run, [float(b) for b in betas], workers=workers, shared=shared, progress=False, log=None)
        wall = time.perf_counter() - t0
    else:
        runs = [_beta_run(beta, **shared) for beta in betas]
        wall = sum(r[0] for r in runs)
    return wall, sum(r[1] for r in runs), [r[2] for r in runs], _cpu() - cpu0


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(threads, scheme, nbetas, names, workers=0):
    betas = BETAS[np.linspace(0, BETAS.size - 1, nbetas).round().astype(int)]
    a = np.random.default_rng(1).random(B * N * N)
    floor = _floor(a)
    if not workers:
        _workload(betas[:1], threads, "euler-normalize", names)   # warm-up (imports, first blocks)
    out = {"threads": threads, "floor": floor}
    wall, nfev, p, cpu = _workload(betas, threads, "euler-normalize", names, workers)
    assert nfev == 300 * len(betas), nfev                       # the authors' steps, none shortened
    scale = BETAS.size / len(betas)
    out.update(euler=wall * scale, euler_cpu=cpu * scale, euler_nfev=nfev, p_end=p)
    if scheme == "adaptive":
        wall, nfev, p, cpu = _workload(betas, threads, "adaptive", names, workers)
        out.update(adaptive=wall * scale, adaptive_cpu=cpu * scale, adaptive_nfev=nfev, p_end_adaptive=p)
    out["floor"] = min(floor, _floor(a))
    out["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out["maxrss_workers"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024   # the largest worker
    print(json.dumps(out))


def lag(B_lag):
    """The table of docs/particles.md: the Euler step's lag behind the ODE, β by β."""
    import meanfield as mf
    import solvers

    x0 = mf.sampling.uniform_points(B_lag * N, D, np.random.default_rng(0)).reshape(B_lag, N, D)

    def t_half(p):
        k = int(np.argmax(p >= 0.5))
        if not np.any(p >= 0.5):
            return np.inf
        return T_EVAL[0] if k == 0 else T_EVAL[k - 1] + (0.5 - p[k - 1]) / (p[k] - p[k - 1]) * (T_EVAL[k] - T_EVAL[k - 1])

    runs = {"ode": dict(rtol=1e-9, atol=1e-11, dense_output=True), "dt 0.1": dict(method="euler-normalize", dt=0.1),
            "dt 0.05": dict(method="euler-normalize", dt=0.05), "dt 0.025": dict(method="euler-normalize", dt=0.025),
            "rtol 1e-6": dict(rtol=1e-6, atol=1e-9, dense_output=True)}
    print(f"B = {B_lag}: t_1/2 (ODE, dt 0.1) and max_t |p_d - p_d^ODE| for " + ", ".join(list(runs)[1:]))
    for beta in BETAS:
        solver = solvers.Particles(mf.Model(beta=float(beta), dim=D), delta=1e-3, diagnostics=("clustered_fraction",))
        p = {k: solver.solve(x0, T_EVAL, save="diagnostics", progress=False, **kw).diagnostics["clustered_fraction"]
             .mean(axis=1) for k, kw in runs.items()}
        errs = "  ".join(f"{np.abs(p[k] - p['ode']).max():.1e}" for k in list(runs)[1:])
        print(f"  beta = {beta:4.1f}: t_1/2 {t_half(p['ode']):6.2f} {t_half(p['dt 0.1']):6.2f}; {errs}; "
              f"p_d(30) {p['ode'][-1]:.3f} {p['dt 0.1'][-1]:.3f}", flush=True)


CLI = ["phase-diagram", "--dim", "3", "-n", str(N), "-B", str(B), "--betas", ",".join(f"{b:g}" for b in BETAS),
       "--t-end", "30", "--n-times", "201", "--scheme", "euler-normalize", "--dt", "0.1", "--no-clusters",
       "--no-progress"]


def cli(repeat, extra=()):
    """The user's Figure 3 command, timed as a subprocess on one thread, against the exp floor."""
    import pathlib
    import tempfile

    import xarray as xr

    exe = pathlib.Path(sys.executable).parent / "meanfield"
    command = ([str(exe)] if exe.exists() else [sys.executable, "-m", "meanfield.cli"]) + CLI + list(extra)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    a = np.random.default_rng(1).random(B * N * N)
    print("command: meanfield " + " ".join(CLI[:-1] + list(extra)) + "  (OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1)")
    print(f"load average before: {' '.join(_uptime())}")
    for _ in range(repeat):
        floor = _floor(a)
        with tempfile.TemporaryDirectory() as out:
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(command + ["--out", out], env=env, capture_output=True, text=True, check=True)
            wall = time.perf_counter() - t0
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            with xr.open_dataset(pathlib.Path(out) / "phase_diagram.nc", decode_times=False) as ds:
                p_end = ds["p"].values[:, -1]
                steps = int(round(float(ds["time"].values[-1]) / 0.1))
        floor = min(floor, _floor(a))
        cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
        ratio = wall / (STEPS * floor)
        print(f"  exp floor {floor * 1e3:.3f} ms; the command {wall:.1f} s (CPU {cpu:.1f} s, CPU ratio "
              f"{cpu / (STEPS * floor):.2f}), {steps} steps per beta; ratio {ratio:.2f} (target <= 4: "
              f"{'OK' if ratio <= 4 else 'ABOVE'}); p_d(30, beta) = {', '.join(f'{p:.3f}' for p in p_end)}",
              flush=True)
    print(f"load average after: {' '.join(_uptime())}")


def _uptime():
    try:
        return open("/proc/loadavg").read().split()[:3]
    except OSError:
        return ["?"]


def main():
    args = sys.argv[1:]
    if "--lag" in args:
        return lag(int(args[args.index("-B") + 1]) if "-B" in args else B)
    if "--cli" in args:
        extra = [a for k in ("--qk", "--v", "--draw") if k in args for a in (k, args[args.index(k) + 1])]
        return cli(int(args[args.index("--repeat") + 1]) if "--repeat" in args else 1, extra)
    if "--child" in args:
        k = args.index("--child")
        return child(int(args[k + 1]), args[k + 2], int(args[k + 3]), tuple(args[k + 4].split(",")),
                     int(args[k + 5]) if len(args) > k + 5 else 0)
    threads = [int(k) for k in (args[args.index("--threads") + 1] if "--threads" in args else "1,2").split(",")]
    nbetas = int(args[args.index("--betas") + 1]) if "--betas" in args else BETAS.size
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 1
    scheme = "adaptive" if "--adaptive" in args else "euler"
    names = "energy,clustered_fraction" if "--energy" in args else "clustered_fraction"
    print(f"Figure 3 workload: (SA), d={D}, n={N}, B={B}, {BETAS.size} betas in [0.5, 8], t in [0, 30], "
          f"euler-normalize dt=0.1 ({STEPS} steps), {names.replace(',', ' + ')} at {T_EVAL.size} saved times, "
          f"save='diagnostics'" + (f"; {nbetas} betas run, times scaled by {BETAS.size}/{nbetas}" if nbetas < 16 else ""))
    print(f"load average before: {' '.join(_uptime())}")
    if nbetas == BETAS.size and scheme == "euler":
        print("the user's command (--cli):")
        cli(1)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    workers = int(args[args.index("--workers") + 1]) if "--workers" in args else 0
    configs = [(k, 0) for k in threads] + ([(1, workers)] if workers else [])
    for _ in range(repeat):
        for k, w in configs:
            env.update(OMP_NUM_THREADS=str(k), OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
            res = subprocess.run([sys.executable, __file__, "--child", str(k), scheme, str(nbetas), names, str(w)],
                                 env=env, capture_output=True, text=True, check=True)
            r = json.loads(res.stdout.strip().splitlines()[-1])
            ratio = r["euler"] / (STEPS * r["floor"])
            target = 4.0 if k == 1 and not w else 2.5
            label = f"workers={w} x 1 thread (the cluster's start included)" if w else f"threads={k}"
            memory = r["maxrss"] + (r["maxrss_workers"] if w else 0)
            print(f"  {label}: exp floor {r['floor'] * 1e3:.3f} ms; "
                  f"euler-normalize {r['euler']:.1f} s (CPU {'of this process ' if w else ''}{r['euler_cpu']:.1f} s, "
                  f"CPU ratio {r['euler_cpu'] / (STEPS * r['floor']):.2f}), ratio {ratio:.2f} (target <= {target}: "
                  f"{'OK' if ratio <= target else 'ABOVE'}); peak memory {memory / 2 ** 30:.3f} GB"
                  f"{' (this process + its largest worker)' if w else ''} "
                  f"(target <= 0.5: {'OK' if memory <= 0.5 * 2 ** 30 else 'ABOVE'}); "
                  f"p_d(30, beta) = {', '.join(f'{p:.3f}' for p in r['p_end'])}")
            if "adaptive" in r:
                rel = r["adaptive"] / r["euler"]
                print(f"             dopri5 rtol 1e-6 (dense output): {r['adaptive']:.1f} s (CPU {r['adaptive_cpu']:.1f} s, "
                      f"{r['adaptive_cpu'] / r['euler_cpu']:.2f} x), {r['adaptive_nfev']} RHS "
                      f"(euler {r['euler_nfev']}), {rel:.2f} x euler-normalize (target <= 2: "
                      f"{'OK' if rel <= 2 else 'ABOVE'}); p_d(30, beta) = "
                      f"{', '.join(f'{p:.3f}' for p in r['p_end_adaptive'])}")
    print(f"load average after: {' '.join(_uptime())}")


if __name__ == "__main__":
    main()
