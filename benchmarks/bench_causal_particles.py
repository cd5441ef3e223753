"""Causal (masked) particle sums against the full sums and against the transform floor.

    python benchmarks/bench_causal_particles.py [--quick] [--threads N]

Printed (one thread unless ``--threads``, β = 4, ALiBi slope λ = 1, (SA)):

* the triangle: the right-hand side of `solvers.Particles` with mask "causal" and ``sums="direct"``
  over the unmasked one (same n, same cloud), at n = 4096 on S^1, S^2 and S^15 (target <= 0.6: the
  blocks of rows stop at their last row's column), and the bare `kernelsums.attention_sums` with
  ``ends``/``bias`` over the full ones; the same for many small clouds (the fused pass: B = 1024
  clouds of n = 32 and B = 64 of n = 256 on S^2);
* the spectral masked sums (`spectralsums.causal_zonal_sums`, blocks of positions with running
  coefficients) at n = 2^14 .. 2^18 on S^1 and S^2: their time over the direct triangle (measured up
  to n = 2^15, extrapolated as n² beyond), and over the floor of one unmasked spectral evaluation
  (one adjoint plus the syntheses of all n points, ducc0, the same lmax) measured in the same run.
"""
import os
import sys

_threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = _threads

import numpy as np  # noqa: E402

import meanfield as mf  # noqa: E402
import solvers  # noqa: E402
from meanfield.sums.kernelsums import attention_sums  # noqa: E402
from meanfield.transformer.masks import token_mask  # noqa: E402
from meanfield.sums.spectralsums import EPSILON, causal_zonal_sums, zonal_sums  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved  # noqa: E402

BETA, SLOPE = 4.0, 1.0
DIRECT_MAX = 1 << 15


def uniform(n, d, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def rhs(model, x, sums="direct"):
    run = solvers.Particles(model, sums=sums, diagnostics="none").start(x)
    y = run.y0 + 0.0

    def evaluate():
        run.workspace.clear()          # the run keeps the last evaluation for the next step: evaluate afresh
        return run.rhs(0.0, y)
    return evaluate


def triangle(n, repeat):
    print(f"triangle at n = {n}: masked / full")
    for d in (2, 3, 16):
        x = uniform(n, d)
        full = mf.Model(beta=BETA, dim=d)
        masked = mf.Model(beta=BETA, dim=d, mask="causal", position_bias=SLOPE)
        t_full, t_masked = interleaved([rhs(full, x), rhs(masked, x)], repeat)
        w = np.full(n, 1.0 / n)
        causal = token_mask("causal", SLOPE, w)
        s_full, s_masked = interleaved([
            lambda: attention_sums(x, x, w, BETA, unit=True, threads=int(_threads)),
            lambda: attention_sums(x, x, w, BETA, unit=True, threads=int(_threads), ends=causal.ends,
                                   bias=causal.bias)], repeat)
        print(f"  S^{d - 1:<3d} rhs {t_masked * 1e3:8.2f} ms / {t_full * 1e3:8.2f} ms = {t_masked / t_full:.3f}   "
              f"sums {s_masked * 1e3:8.2f} / {s_full * 1e3:8.2f} ms = {s_masked / s_full:.3f}")


def small_clouds(repeat):
    print("fused pass, many small clouds on S^2: masked / full")
    for B, n in ((1024, 32), (64, 256)):
        x = uniform(B * n, 3).reshape(B, n, 3)
        w = np.full(n, 1.0 / n)
        causal = token_mask("causal", SLOPE, w)
        t = interleaved([lambda: attention_sums(x, x, w, BETA, unit=True, threads=int(_threads)),
                         lambda: attention_sums(x, x, w, BETA, unit=True, threads=int(_threads), ends=causal.ends),
                         lambda: attention_sums(x, x, w, BETA, unit=True, threads=int(_threads), ends=causal.ends,
                                                bias=causal.bias)], repeat)
        print(f"  B = {B:5d}, n = {n:4d}: full {t[0] * 1e3:6.2f} ms   mask {t[1] / t[0]:.3f}   mask and ALiBi "
              f"{t[2] / t[0]:.3f}")


def spectral(sizes, repeat):
    print("spectral masked sums: time, over the direct triangle, over one unmasked spectral evaluation")
    for d in (2, 3):
        sums = zonal_sums(BETA, d, EPSILON)
        direct_rate = None
        for n in sizes:
            x = uniform(n, d, seed=n)
            w = np.full(n, 1.0 / n)
            causal = token_mask("causal", SLOPE, w)

            def masked():
                return causal_zonal_sums(sums, x, w, causal.ends, causal.positions, SLOPE)

            def unmasked():
                return sums.sums(x, x, w)

            fns = [masked, unmasked]
            if n <= DIRECT_MAX:
                fns.append(lambda: attention_sums(x, x, w, BETA, unit=True, ends=causal.ends, bias=causal.bias))
            times = interleaved(fns, repeat)
            if n <= DIRECT_MAX:
                direct_rate = times[2] / n ** 2
            direct = times[2] if n <= DIRECT_MAX else direct_rate * n ** 2
            mark = "" if n <= DIRECT_MAX else " (extrapolated)"
            print(f"  S^{d - 1} n = {n:7d}  lmax {sums.lmax:3d}  masked {times[0] * 1e3:8.1f} ms  "
                  f"direct / masked {direct / times[0]:7.1f}{mark}  masked / unmasked {times[0] / times[1]:6.1f}")


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    triangle(2048 if quick else 4096, 2 if quick else 5)
    small_clouds(2 if quick else 7)
    spectral([1 << 14] if quick else [1 << 14, 1 << 15, 1 << 16, 1 << 18], 1 if quick else 3)
