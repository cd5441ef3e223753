"""Attention beyond softmax: one evaluation of the particles' field under L2 and Sinkhorn attention against
softmax, at n = 10^4 (docs/attention.md).

    python benchmarks/bench_attention.py [--quick] [--n N]

For n tokens (S^2: iid uniform at β = 4; R^3: N(0, 0.25 I) at β = 1), times `run.rhs(0, x)` of
`solvers.Particles` with the direct sums for

* softmax (the baseline, measured in the same run, interleaved);
* L2 (softmax's sums with a column term in the exponent);
* Sinkhorn, cold (potentials from 0, as at the first step of a run) and warm (from the potentials of
  the state x, evaluated at x + 0.05·v(x), as between the stages of a run), with the iterations each
  took.

Then one right-hand side of `solvers.FourierCircle` (64 modes) and `solvers.SphericalHarmonics`
(L = 16) at β = 2, softmax against Sinkhorn (the plan of the grid measure, from zero potentials).

The ratios to softmax are printed with the machine's load (`uptime`) before and after: figures taken
with a load above about 0.6 on this 2-core machine are not timings of the code alone.
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved  # noqa: E402

import meanfield as mf  # noqa: E402
import solvers  # noqa: E402


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def field(run, x):
    """One evaluation of the field at x (the run's kept evaluation of the last state dropped first)."""
    run.workspace.pop("evaluation", None)
    return run.rhs(0.0, x)


def cases(domain, n, rng):
    """(name, callable, iterations reader) of the field evaluations on ``domain``."""
    if domain == "sphere":
        x, _ = mf.sample(mf.densities.uniform(), n, 3, rng=rng)
        beta = 4.0
    else:
        x = 0.5 * rng.standard_normal((n, 3))
        beta = 1.0
    out = []
    for attention in ("softmax", "l2", "sinkhorn"):
        model = mf.Model(beta=beta, dim=3, attention=attention)
        run = solvers.Particles(model, sums="direct").start(x, [0.0, 1.0], domain=domain)
        if attention != "sinkhorn":
            out.append((f"{domain:9s} {attention:8s}", lambda run=run: field(run, x), None))
            continue
        v = field(run, x)
        moved = x + 0.05 * v
        if domain == "sphere":
            moved /= np.linalg.norm(moved, axis=-1, keepdims=True)
        record = run.workspace["sinkhorn"]
        at_x = dict(record["potentials"])

        def cold(run=run, record=record):
            record["potentials"].clear()
            record["window_iterations"] = 0
            field(run, x)
            return record["window_iterations"]

        def warm(run=run, record=record, at_x=at_x):
            record["potentials"].clear()
            record["potentials"].update(at_x)
            record["window_iterations"] = 0
            field(run, moved)
            return record["window_iterations"]

        out.append((f"{domain:9s} sinkhorn cold", cold, cold))
        out.append((f"{domain:9s} sinkhorn warm", warm, warm))
    return out


def continuum_cases():
    """(name, callable) of one right-hand side of the spectral solvers, softmax and Sinkhorn (the plan of
    their grid measure, from zero potentials: the cost at the first step, an upper bound of the others)."""
    out = []
    for make, rho0, label in ((lambda m: solvers.FourierCircle(m, modes=64), mf.densities.perturbed_uniform(0.3, 2),
                               "S^1 K=64"),
                              (lambda m: solvers.SphericalHarmonics(m, lmax=16),
                               mf.densities.von_mises_fisher([0, 0, 1.0], 1.0), "S^2 L=16")):
        for attention in ("softmax", "sinkhorn"):
            dim = 2 if label.startswith("S^1") else 3
            run = make(mf.Model(beta=2.0, dim=dim, attention=attention)).start(rho0, [0.0, 1.0])

            def rhs(run=run):
                run.workspace.pop("sinkhorn", None)          # cold: potentials from 0
                return run.rhs(0.0, run.y0)

            out.append((f"{label} {attention}{' cold' if attention == 'sinkhorn' else ''}", rhs))
    return out


def main():
    quick = "--quick" in sys.argv
    n = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else (2000 if quick else 10_000)
    repeat = 2 if quick else 3
    print(f"load before: {uptime()}")
    print(f"n = {n}, direct sums, threads = {mf.threads.default_threads()}, best of {repeat}")
    rng = np.random.default_rng(0)
    for domain in ("sphere", "euclidean"):
        rows = cases(domain, n, rng)
        times = interleaved([fn for _, fn, _ in rows], repeat)
        base = times[0]
        for (name, _, iterations), t in zip(rows, times):
            extra = "" if iterations is None else f"  ({iterations()} iterations)"
            print(f"{name:24s} {t * 1e3:9.1f} ms  {t / base:6.2f}x softmax{extra}")
    rows = continuum_cases()
    times = interleaved([fn for _, fn in rows], repeat)
    for k, ((name, _), t) in enumerate(zip(rows, times)):
        print(f"{name:24s} {t * 1e3:9.1f} ms  {t / times[k - k % 2]:6.2f}x softmax")
    print(f"load after: {uptime()}")


if __name__ == "__main__":
    main()
