"""One thread control: the speed on two threads over one, and the CPU time on one (docs/threads.md).

    python benchmarks/bench_threads.py [--quick]

Timed in alternation (one thread, two threads, again; the best of each), on what users run:

* 10^6 particles on S^2 with the spectral sums, (SA) β = 4: one right-hand side, and a run to t = 1
  (``solvers.Particles(model, sums="spectral", threads=k).solve``);
* one right-hand side of ``solvers.SphericalHarmonics`` at lmax = 255, (SA) β = 4;
* the Figure 3 command, ``meanfield phase-diagram --threads k`` (a subprocess): ``--quick``, the
  default, and Figure 3 as the authors ran it (16 β, B = 1024, their Euler step; `FIGURE3`), each also
  timed after the interpreter's start and imports (the ``wall_time`` of its summary.json);
* the baseline: one ducc0 synthesis at lmax = 255 on one and two threads (what the library cannot beat).

For each the ratio wall(1 thread) / wall(2 threads) is printed, and on one thread the CPU time over
the wall time (1.0: no thread spins beside the work). Run it on an idle machine (it prints ``uptime``).
"""
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from ducc0.sht import synthesis_2d

import meanfield as mf
import solvers

QUICK = "--quick" in sys.argv


def timed(fn):
    """(wall, cpu) seconds of fn(): the CPU time of this process and of its children."""
    def cpu():
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    c0, t0 = cpu(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, cpu() - c0


def compare(name, make, repeat):
    """Best wall of make(1)() and make(2)(), alternated; prints the ratio and the CPU/wall on one thread."""
    fns = {k: make(k) for k in (1, 2)}
    for fn in fns.values():
        fn()
    best = {1: (np.inf, np.inf), 2: (np.inf, np.inf)}
    for _ in range(repeat):
        for k, fn in fns.items():
            wall, cpu = timed(fn)
            if wall < best[k][0]:
                best[k] = (wall, cpu)
    (w1, c1), (w2, _) = best[1], best[2]
    print(f"{name:<52} 1 thread {w1:8.3f} s   2 threads {w2:8.3f} s   speed-up {w1 / w2:5.2f}   "
          f"CPU/wall on 1 thread {c1 / w1:5.2f}")
    return w1 / w2


def particles(n, t_end):
    model = mf.Model(beta=4.0, dim=3)
    x0 = mf.sample(lambda x: 1 + 0.5 * x[..., 2], n, 3, method="quasi")[0]

    def make(k):
        solver = solvers.Particles(model, sums="spectral", diagnostics="none", threads=k)
        if t_end is None:
            run = solver.start(x0)
            states = [run.y0, np.roll(run.y0, 1, axis=0)]      # alternated: the field kept from the last call never applies
            return lambda: [run.rhs(0.0, y) for y in states]
        return lambda: solver.solve(x0, [0.0, t_end], save="ends", progress=False)
    return make


def harmonics(lmax):
    model = mf.Model(beta=4.0, dim=3)

    def make(k):
        run = solvers.SphericalHarmonics(model, lmax, threads=k).start(lambda x: 1 + 0.3 * x[..., 2])
        return lambda: run.rhs(0.0, run.y0)
    return make


def synthesis(lmax):
    alm = np.zeros((1, (lmax + 1) * (lmax + 2) // 2), dtype=complex)
    alm[0, : lmax + 1] = 1.0

    def make(k):
        return lambda: synthesis_2d(alm=alm, spin=0, lmax=lmax, geometry="GL", ntheta=lmax + 1, nphi=2 * lmax + 1,
                                    nthreads=k)
    return make


FIGURE3 = {
    "meanfield phase-diagram --quick": ["--quick"],
    "meanfield phase-diagram (10 β, B = 1024, adaptive)": [],
    "Figure 3 as the authors ran it (16 β, Euler)": [
        "-B", "1024", "--betas", ",".join(f"{b:g}" for b in np.arange(1, 17) / 2), "--t-end", "30",
        "--n-times", "201", "--scheme", "euler-normalize", "--dt", "0.1", "--no-clusters"],
}


def command(name, options, repeat):
    """``meanfield phase-diagram OPTIONS --threads k`` in a subprocess, k = 1, 2 alternated (after one
    warm-up of each): the best process wall time of each, and the command's own ``wall_time`` of
    summary.json (after the interpreter's start and the imports), their ratios, and CPU/wall on one
    thread."""
    import json

    out = tempfile.mkdtemp()
    best = {k: (np.inf, np.inf, np.inf) for k in (1, 2)}
    for i in range(repeat + 1):
        for k in (1, 2):
            cmd = [sys.executable, "-m", "meanfield", "phase-diagram", *options, "--threads", str(k), "--no-progress",
                   "--out", out]
            wall, cpu = timed(lambda: subprocess.run(cmd, check=True, capture_output=True))
            own = json.loads(open(os.path.join(out, "summary.json")).read())["wall_time"]
            if i and wall < best[k][0]:
                best[k] = (wall, own, cpu)
    (w1, o1, c1), (w2, o2, _) = best[1], best[2]
    print(f"{name:<52} 1 thread {w1:8.3f} s   2 threads {w2:8.3f} s   speed-up {w1 / w2:5.2f}   "
          f"CPU/wall on 1 thread {c1 / w1:5.2f}")
    print(f"{'   the same, after start-up and imports (summary.json)':<52} 1 thread {o1:8.3f} s   2 threads {o2:8.3f} s   "
          f"speed-up {o1 / o2:5.2f}")
    return w1 / w2


def main():
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"MEANFIELD_THREADS={os.environ.get('MEANFIELD_THREADS', 'unset')} "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')} CPUs {os.cpu_count()}")
    n = 100_000 if QUICK else 1_000_000
    repeat = 2 if QUICK else 3
    compare("baseline: ducc0 synthesis, lmax 255", synthesis(255), 5 * repeat)
    compare(f"spectral particles S^2, n = {n:.0e}, two RHS", particles(n, None), repeat)
    compare(f"spectral particles S^2, n = {n:.0e}, run to t = 1", particles(n, 1.0), 1 if QUICK else 2)
    compare("SphericalHarmonics RHS, lmax 255", harmonics(255), 15 * repeat)
    for name, options in list(FIGURE3.items())[:1 if QUICK else 3]:
        command(name, options, repeat)


if __name__ == "__main__":
    main()
