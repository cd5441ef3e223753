"""FiniteElements: cost per step, memory, and a work-precision diagram against SphericalHarmonics.

    OMP_NUM_THREADS=1 python benchmarks/bench_fem.py [--quick]

1. Cost of one transport operator (nonlocal field + dolfinx assembly + upwinding) and of one SSP-RK3
   step (3 operators + 3 limited Euler stages) at 10 242 (icosphere r = 5) and 40 962 (r = 6)
   vertices, for the direct O(N²) quadrature and the optional SHT path, with the peak numpy memory
   (tracemalloc). Baselines measured in the same run: the raw ``np.exp`` of the N² Gram entries
   (the irreducible work of the direct sums) and one sparse mat-vec with the P1 pattern.
2. Work-precision diagram on S^2: L1 error at t = 1 (SA, β = 2, a smooth zonal ρ0, so that an exact
   Legendre–Galerkin reference can be computed) against CPU time, FEM (r = 2..5) next to
   SphericalHarmonics (several lmax). Saved as benchmarks/out/fem_work_precision.png.
"""
import pathlib
import sys
import time
import tracemalloc

import numpy as np

import meanfield as mf
from solvers.references import legendre_zonal

OUT = pathlib.Path(__file__).resolve().parent / "out"
QUICK = "--quick" in sys.argv


def cpu(fn, repeat=1):
    best = np.inf
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def peak_memory(fn):
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def cost_per_step():
    from solvers.fem import FiniteElements

    rho0 = mf.densities.mixture([mf.densities.von_mises_fisher([0, 0, 1], 1.0),
                                 mf.densities.von_mises_fisher([1, 0, 0], 2.0)], [0.6, 0.4])
    model = mf.Model(beta=4.0, dim=3)
    print("== cost per step (SA, beta = 4, sphere) ==")
    for r in ((5,) if QUICK else (5, 6)):
        for potential in ("sht", "quadrature"):
            s = FiniteElements(model, refinement=r, potential=potential)
            run = s.start(rho0, method="ssprk3")
            rho = run.y0
            step = run.stepper.step_function(run)
            s.operator(rho)                                           # warm-up (form compilation)
            t_op, L = cpu(lambda: s.operator(rho))
            dt = 0.5 / float(np.max(-L[0][s._diag] / s.m))
            if potential == "quadrature" and r == 6:
                t_step = 3 * t_op                                     # one step = 3 operators (+ cheap stages)
                note = " (3 × operator)"
            else:
                t_step, _ = cpu(lambda: step(0.0, rho, dt))
                note = ""
            mem = peak_memory(lambda: s.operator(rho))
            from scipy.sparse import csr_matrix

            A = csr_matrix((L[0], s._indices, s._indptr), shape=(s.N, s.N))
            t_mv, _ = cpu(lambda: [A @ rho for _ in range(100)])
            t_mv /= 100
            if potential == "quadrature":
                x = s.x

                def raw_exp():
                    for a in range(0, s.N, s.chunk):
                        np.exp(x[a:a + s.chunk] @ x.T)
                t_exp, _ = cpu(raw_exp)
                base = f"raw exp of the N² Gram entries {t_exp:.3g} s -> operator/exp = {t_op / t_exp:.2f}"
            else:
                base = f"sparse mat-vec {t_mv * 1e3:.3g} ms -> operator/matvec = {t_op / t_mv:.0f}"
            print(f"N = {s.N:6d} {potential:10s}: operator {t_op:.3g} s, SSP-RK3 step {t_step:.3g} s{note}, "
                  f"peak numpy memory {mem / 2**20:.0f} MiB, CFL dt = {dt:.3g}; {base}")


def work_precision():
    import solvers
    from solvers.fem import FiniteElements, reference_quadrature

    rho0 = mf.densities.mixture([mf.densities.von_mises_fisher([0, 0, 1], 1.0),
                                 mf.densities.von_mises_fisher([0, 0, -1], 1.0)], [0.6, 0.4])
    model = mf.Model(beta=2.0, dim=3)
    ref = legendre_zonal(2.0, lambda z: rho0(np.stack([np.sqrt(1 - z * z), 0 * z, z], -1)), 1.0)
    xq, wq = reference_quadrature(3, 64)
    rq = ref(xq[:, 2])
    print("== work-precision (SA, beta = 2, t = 1, sphere; L1 error vs exact zonal reference) ==")
    curves = {}
    fem_levels = (2, 3, 4) if QUICK else (2, 3, 4, 5)
    for potential in ("sht", "quadrature"):
        pts = []
        for r in fem_levels:
            if potential == "quadrature" and r == 5 and not QUICK:
                continue                                               # ~2 min; the SHT path has the same error
            s = FiniteElements(model, refinement=r, kernel_cells=2.0, potential=potential)
            t, sol = cpu(lambda: s.solve(rho0, [0, 1.0], progress=False))
            err = float(wq @ np.abs(sol.density(xq) - rq))
            pts.append((t, err))
            print(f"FEM {potential:10s} r={r} N={s.N:6d}: cpu {t:7.3f} s, L1 error {err:.3e}")
        curves[f"FiniteElements ({potential})"] = pts
    try:
        SH = solvers.SphericalHarmonics
    except AttributeError:
        SH = None
        print("solvers.SphericalHarmonics is not available: the diagram shows the FEM only")
    if SH is not None:
        pts = []
        for lmax in (16, 20, 24, 32):
            try:
                t, sol = cpu(lambda: SH(model, lmax=lmax).solve(rho0, [0, 1.0], progress=False))
            except (ValueError, mf.SolverError) as exc:
                print(f"SphericalHarmonics lmax={lmax}: {type(exc).__name__}: {exc}")
                continue
            err = float(wq @ np.abs(sol.density(xq) - rq))
            pts.append((t, err))
            print(f"SphericalHarmonics lmax={lmax:3d}: cpu {t:7.3f} s, L1 error {err:.3e}")
        curves["SphericalHarmonics"] = pts
    fem = curves["FiniteElements (sht)"]
    if len(fem) >= 2:
        (t0, e0), (t1, e1) = fem[-2], fem[-1]
        print(f"FEM (sht): error ratio per refinement {e0 / e1:.2f} at cpu ratio {t1 / max(t0, 1e-9):.1f}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for (name, pts), mk in zip(curves.items(), "os^"):
        if pts:
            t, e = np.array(pts).T
            ax.loglog(np.maximum(t, 1e-3), e, mk + "-", label=name)
    ax.set_xlabel("CPU time [s]")
    ax.set_ylabel(r"$L^1$ error at $t = 1$")
    ax.set_title(r"work-precision, $S^2$, SA, $\beta = 2$")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    fig.savefig(OUT / "fem_work_precision.png", dpi=120)
    print(f"saved {OUT / 'fem_work_precision.png'}")
    return curves


if __name__ == "__main__":
    cost_per_step()
    work_precision()
