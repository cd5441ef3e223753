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
"""
import sys

import numpy as np

import meanfield as mf
import solvers
from _timing import interleaved


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
    main(quick="--quick" in sys.argv)
    main_lagrangian(quick="--quick" in sys.argv)
