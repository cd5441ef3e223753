"""solvers.Lagrangian: one right-hand side against the exponential floor of the kernel-sum engine.

    python benchmarks/bench_lagrangian.py [--quick] [--threads N]

The right-hand side of the characteristics (velocity and divergence at every label, one pass of
`meanfield.sums.kernelsums.kernel_sums` over the moments [w, w x, w x⊗x]) costs one n×n exponential and
one n×n×p matmul (p = 6 on S^1, 10 on S^2). Baseline: ``np.exp`` over an n×n float64 array, timed
in alternation with the right-hand side in the same run (minimum of several repetitions), at the
same node count n. Printed: the ratio with the companion rule of the error estimate (the default,
about 1.25 n² exponentials) and without it. Target: ratio <= 3 (docs/benchmarks.md).
Also printed: the wall time of the S^1 long run of the docs (β = 5, t <= 50, adaptive panels).
``--threads N`` sets the BLAS/OpenMP thread count (on a loaded machine, several BLAS threads make
the small per-block matmuls much slower; 1 is the fair setting there).
"""
import os
import sys
import time

if "--threads" in sys.argv:
    _n = sys.argv[sys.argv.index("--threads") + 1]
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = _n

import numpy as np  # noqa: E402

import meanfield as mf  # noqa: E402
import solvers  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved  # noqa: E402


def rhs_of(model, nodes, estimate):
    run = solvers.Lagrangian(model, nodes, estimate=estimate).start(mf.densities.uniform())
    y = run.y0 + 0.0
    return lambda: run.rhs(0.0, y)


def rhs_benchmark(repeat, sizes):
    print("right-hand side / np.exp(n×n) at the same node count n (fine labels)")
    worst = 0.0
    for dim, n in sizes:
        model = mf.Model(beta=4.0, dim=dim)
        f_est, f_plain = rhs_of(model, n, True), rhs_of(model, n, False)
        n_fine = solvers.Lagrangian(model, n, estimate=False).nodes
        a = np.random.default_rng(0).random((n_fine, n_fine))
        base, t_est, t_plain = interleaved([lambda: np.exp(a), f_est, f_plain], repeat)
        worst = max(worst, t_est / base)
        print(f"  S^{dim - 1} n={n_fine:5d}: exp {1e3 * base:7.2f} ms | rhs with estimate {t_est / base:5.2f}x"
              f" | without {t_plain / base:5.2f}x")
    print(f"worst ratio (with the error estimate): {worst:.2f}  (target <= 3)")
    return worst


def long_run():
    model = mf.Model(5.0, 2)
    phases = np.random.default_rng(0).uniform(0, 2 * np.pi, 8)

    def rho0(x):
        theta = np.arctan2(x[..., 1], x[..., 0])
        return 1 + 1e-4 * np.cos(theta[..., None] * np.arange(1, 9) + phases).sum(-1)

    t0 = time.perf_counter()
    sol = solvers.Lagrangian(model, panels=32).solve_adaptive(rho0, np.linspace(0, 50, 51), tol=1e-4)
    wall = time.perf_counter() - t0
    print(f"S^1 (SA) beta=5 to t=50, adaptive panels: {wall:.1f} s, rounds {sol.stats['rounds']}, nodes "
          f"{sol.stats['nodes_per_round']}, W1 estimate {sol.stats['error_estimate']:.2e}")


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    sizes = [(2, 1024), (3, 2048)] if quick else [(2, 1024), (2, 4096), (3, 2048), (3, 4608)]
    threads = os.environ.get("OPENBLAS_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "unset"))
    print(f"BLAS threads {threads}")
    rhs_benchmark(20 if quick else 40, sizes)
    if not quick:
        long_run()
