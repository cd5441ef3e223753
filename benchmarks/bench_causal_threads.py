"""Threads for causal work: one thread against two, measured in turn in the same run.

    python benchmarks/bench_causal_threads.py [--quick]

Printed (β = 2, ALiBi slope λ = 1, (SA), ``uptime`` first: the ratios mean something only on an idle
machine), each as time on 1 thread / time on 2 threads (target >= 1.6), each the best of bursts of five
right-hand sides in a row (as a run evaluates them), and whether the results are the same bits:

* the right-hand side of `solvers.Particles` with mask "causal" at n = 16384: the blocked spectral sums
  on S^1 and S^2 (blocks of positions shared among the threads, `spectralsums.causal_zonal_sums`) and
  the direct triangle on S^1 (at n = 4096; the tiles of rows in equal-cost parts, the largest first);
* the right-hand side of a layered `solvers.SphericalHarmonics` run at lmax 63 with M = 64 positions
  (its 64 maps per transform shared among the threads in parts) and of a layered `solvers.FourierCircle`
  run at K = 256 with M = 64 (pocketfft's workers over the rows).
"""
import os
import subprocess
import sys

import numpy as np

import meanfield as mf
import solvers

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved  # noqa: E402

BETA, SLOPE = 2.0, 1.0


def uniform(n, d, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def rhs(solver, initial):
    """One fresh right-hand side at the initial state of ``solver``'s run from ``initial``."""
    run = solver.start(initial)
    y = run.y0 + 0.0

    def evaluate():
        run.workspace.clear()
        return run.rhs(0.0, y)
    return evaluate


def turning(x, s):
    return 1 + 0.5 * (x[..., 0] * np.cos(2 * s) + x[..., -1] * np.sin(2 * s))


def row(name, make, repeat, burst=5):
    """The time of one right-hand side on one and on two threads, each timed over ``burst`` evaluations in
    a row, as a run makes them (a run's threads stay awake between its evaluations; a virtual machine
    takes 50-100 µs to wake an idle core), the two alternated ``repeat`` times."""
    one, two = make(1), make(2)

    def bursts(evaluate):
        return lambda: [evaluate() for _ in range(burst)]

    t1, t2 = (t / burst for t in interleaved([bursts(one), bursts(two)], repeat))
    same = np.array_equal(one(), two())
    print(f"  {name:<46s} {t1 * 1e3:8.1f} ms / {t2 * 1e3:8.1f} ms = {t1 / t2:5.2f}x   same bits: {same}")


def main():
    quick = "--quick" in sys.argv
    repeat = 3 if quick else 7
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print("one thread / two threads")
    n = 4096 if quick else 16384
    for d in (2, 3):
        model = mf.Model(BETA, d, mask="causal", position_bias=SLOPE)
        x = uniform(n, d)
        row(f"particles S^{d - 1}, spectral, n = {n}",
            lambda k: rhs(solvers.Particles(model, sums="spectral", diagnostics="none", threads=k), x), repeat)
    model = mf.Model(BETA, 2, mask="causal", position_bias=SLOPE)
    x = uniform(4096, 2)
    row("particles S^1, direct triangle, n = 4096",
        lambda k: rhs(solvers.Particles(model, sums="direct", diagnostics="none", threads=k), x), repeat)
    L, K, M = (31, 128, 32) if quick else (63, 256, 64)
    sphere = mf.Model(BETA, 3, mask="causal", position_bias=SLOPE)
    row(f"layered harmonics, lmax = {L}, M = {M}",
        lambda k: rhs(solvers.SphericalHarmonics(sphere, L, positions=M, threads=k), turning), repeat)
    row(f"layered Fourier, K = {K}, M = {M}",
        lambda k: rhs(solvers.FourierCircle(model, K, positions=M, threads=k), turning), repeat)


if __name__ == "__main__":
    main()
