"""The layered right-hand side of causal attention against M unmasked right-hand sides (docs/causal.md).

    python benchmarks/bench_causal_continuum.py [--quick]

ratio = (one layered RHS with M positions) / (M × one unmasked RHS of the same solver at the same
resolution), both measured in this run, in alternation (the minimum of several rounds), because the
machine is shared. Target: <= 3. The layered RHS is the prefix means ρ̄ (the O(M) recursion of
`meanfield.transformer.positions.PositionRule`) and one batched transport for all positions (FFTs on S^1; one scalar
synthesis, one spin-1 synthesis and one spin-1 adjoint synthesis on S^2, each over all positions);
the prefix recursion alone is printed as well.

Labels in (σ, x) (`solvers.Lagrangian` with ``positions``, docs/causal.md "Through clustering"): one layered
RHS with n labels per position against M unmasked Lagrangian RHS with n labels (ratio_M, about M/2 + 8:
every position sees the labels of all earlier ones) and against one unmasked RHS with all M·n labels
(ratio_all, about 1/2 + 8/M: the triangle of the causal sums plus the own panels).

Spectral prefix sums of the labels (``sums="spectral"``, `meanfield.sums.spectralsums.layered_zonal_sums`; issue 47),
(SA), β = 4, λ = 1: one layered RHS with n labels per position against one unmasked spectral RHS of n labels
(ratio_1, target <= 20; each timed in three calls in a row a round, as a run's steps make them) and against
the direct layered sums (speed-up, target >= 20; one call, seconds), and
on 1 against 2 threads (target >= 1.6). sums = the layered sums alone (`layered_zonal_sums`: the transforms of
every node and the prefix recursion, no field) against one unmasked spectral RHS of n labels: ratio_1 cannot go
below it (on S^2 it is M nodes' ducc0 transforms, one adjoint and three syntheses each, at n labels; the
unmasked RHS makes four). all = one unmasked spectral RHS of all M·n labels against one of n labels.
``--spectral`` runs this table alone; ``--no-direct`` skips the direct sums (a minute on S^1 at n = 8192).
"""
import os
import sys

import numpy as np

import meanfield as mf
import solvers
from meanfield.sums.spectralsums import layered_zonal_sums, zonal_sums
from solvers.layered_lagrangian import unit_labels
from _timing import best, interleaved


def density(x, s):
    return 1 + 0.3 * (x[..., 0] * np.cos(2 * s) + x[..., 1] * np.sin(2 * s))


def case(dim, resolution, M, repeat):
    """(layered RHS, M unmasked RHS, prefix means) in seconds."""
    kind = solvers.FourierCircle if dim == 2 else solvers.SphericalHarmonics
    masked = kind(mf.Model(2.0, dim, mask="causal", position_bias=1.0), resolution, positions=M)
    plain = kind(mf.Model(2.0, dim), resolution)
    run = masked.start(density)
    one = plain.start(lambda x: density(x, 0.5))
    y, y1 = run.y0, one.y0
    t_layered, t_one, t_prefix = interleaved([lambda: run.rhs(0.0, y), lambda: one.rhs(0.0, y1),
                                              lambda: masked.layers.prefix_mean(y)], repeat)
    return t_layered, M * t_one, t_prefix


def lagrangian_case(dim, n, M, repeat):
    """(layered Lagrangian RHS, M unmasked RHS with n labels, one unmasked RHS with M·n labels) in seconds."""
    model = mf.Model(2.0, dim, mask="causal", position_bias=1.0)
    masked = solvers.Lagrangian(model, n, positions=M, estimate=False)
    plain = solvers.Lagrangian(mf.Model(2.0, dim), n, estimate=False, sums="direct")
    whole = solvers.Lagrangian(mf.Model(2.0, dim), n * M, estimate=False, sums="direct")
    run, one, every = masked.start(density), plain.start(lambda x: density(x, 0.5)), whole.start(lambda x: density(x, 0.5))
    t_layered, t_one, t_all = interleaved([lambda: run.rhs(0.0, run.y0), lambda: one.rhs(0.0, one.y0),
                                           lambda: every.rhs(0.0, every.y0)], repeat)
    return t_layered, M * t_one, t_all


def main_lagrangian(quick=False):
    repeat = 3 if quick else 7
    cases = [(2, 256, 16), (2, 256, 32), (3, 512, 16)] if not quick else [(2, 128, 16)]
    print(f"\nlabels in (sigma, x): {'domain':7} {'n':>5} {'M':>4} {'layered (ms)':>13} {'M x plain (ms)':>15} "
          f"{'ratio_M':>8} {'ratio_all':>10}")
    for dim, n, M in cases:
        layered, plain, whole = lagrangian_case(dim, n, M, repeat)
        print(f"{'':22}S^{dim - 1:<5} {n:>5} {M:>4} {1e3 * layered:>13.1f} {1e3 * plain:>15.1f} "
              f"{layered / plain:>8.2f} {layered / whole:>10.2f}")


def spectral_case(dim, n, M, repeat, direct=True):
    """(layered spectral RHS on 1 thread, on 2 threads, one unmasked spectral RHS of n labels, one of M·n labels,
    the layered sums alone, the direct layered RHS or nan) in seconds."""
    model = mf.Model(4.0, dim, mask="causal", position_bias=1.0)
    layered = [solvers.Lagrangian(model, n, positions=M, estimate=False, sums="spectral", threads=k).start(density)
               for k in (1, 2)]
    one, every = (solvers.Lagrangian(mf.Model(4.0, dim), k, estimate=False, sums="spectral", threads=1).start(
        lambda x: density(x, 0.5)) for k in (n, M * n))
    run = layered[0]
    (sl, w), = run.systems
    x = unit_labels(run.y0[..., :dim])[:, sl]
    sums = zonal_sums(4.0, dim)
    t1, t2, t_one, t_all, t_sums = interleaved([
        lambda: run.rhs(0.0, run.y0), lambda: layered[1].rhs(0.0, layered[1].y0), lambda: one.rhs(0.0, one.y0),
        lambda: every.rhs(0.0, every.y0),
        lambda: layered_zonal_sums(sums, x, w, run.solver.layers, each=lambda *sums_run: None)], repeat, calls=3)
    t_direct = np.nan
    if direct:
        slow = solvers.Lagrangian(model, n, positions=M, estimate=False, sums="direct", threads=1).start(density)
        t_direct = best(lambda: slow.rhs(0.0, slow.y0), 1)
    return t1, t2, t_one, t_all, t_sums, t_direct


def main_spectral(quick=False, direct=True):
    repeat = 3 if quick else 7
    cases = [(3, 2048, 32), (2, 8192, 32)] if not quick else [(3, 512, 16), (2, 2048, 16)]
    print(f"\nspectral labels, (SA) beta = 4, {os.getloadavg()[0]:.1f} load: {'domain':7} {'n':>5} {'M':>4} "
          f"{'layered (ms)':>13} {'ratio_1':>8} {'sums':>5} {'all':>5} {'direct (ms)':>12} {'speed-up':>9} "
          f"{'2 threads':>10}")
    for dim, n, M in cases:
        t1, t2, t_one, t_all, t_sums, t_direct = spectral_case(dim, n, M, repeat, direct)
        print(f"{'':39}S^{dim - 1:<5} {n:>5} {M:>4} {1e3 * t1:>13.1f} {t1 / t_one:>8.1f} {t_sums / t_one:>5.1f} "
              f"{t_all / t_one:>5.1f} {1e3 * t_direct:>12.0f} {t_direct / t1:>9.0f} {t1 / t2:>9.2f}x")


def main(quick=False):
    repeat = 5 if quick else 20
    cases = [(2, 64, 64), (2, 256, 128), (3, 31, 32), (3, 63, 64)] if not quick else [(2, 64, 32), (3, 31, 16)]
    print(f"{'domain':7} {'resolution':>10} {'M':>5} {'layered (ms)':>13} {'M x plain (ms)':>15} "
          f"{'ratio':>6} {'prefix (ms)':>12}")
    worst = 0.0
    for dim, resolution, M in cases:
        layered, plain, prefix = case(dim, resolution, M, repeat)
        worst = max(worst, layered / plain)
        name = "modes" if dim == 2 else "lmax"
        print(f"S^{dim - 1:<5} {name + '=' + str(resolution):>10} {M:>5} {1e3 * layered:>13.3f} {1e3 * plain:>15.3f} "
              f"{layered / plain:>6.2f} {1e3 * prefix:>12.3f}")
    print(f"worst ratio {worst:.2f} (target <= 3)")
    return worst


if __name__ == "__main__":
    print(os.popen("uptime").read().strip())
    if "--spectral" not in sys.argv:
        main(quick="--quick" in sys.argv)
        main_lagrangian(quick="--quick" in sys.argv)
    main_spectral(quick="--quick" in sys.argv, direct="--no-direct" not in sys.argv)
