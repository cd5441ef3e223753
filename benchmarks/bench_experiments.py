"""Costs of the experiments, as ratios against baselines measured in the same run.

    python benchmarks/bench_experiments.py

* phase diagram, one β (d = 3, n = 32, B = 256, t ∈ [0, 30], 31 saved times): the adaptive
  scheme (default) / the authors' explicit Euler-then-normalise scheme with dt = 0.1 (300 steps);
  the full default run (10 β, B = 1024) costs about 40× one such β;
* the clustered-pair estimate over all saved times / one batched Gram matrix x xᵀ of the same
  positions (the irreducible work);
* Γ_∞,δ: t*(β) for 60 values of β / one solve_ivp of the same ODE to t = 30 without events;
* the discrete-design search (n = 12, 4 starts) / 4 evaluations of the 12-point energy·10³.
"""
import importlib

import numpy as np
from scipy.integrate import solve_ivp

import meanfield as mf
from _timing import best
import solvers

pd = importlib.import_module("meanfield.experiments.phase_diagram")
vp = importlib.import_module("meanfield.experiments.verify_prop34")


def main():
    B, n, d = 256, 32, 3
    x0 = mf.sampling.uniform_points(B * n, d, 0).reshape(B, n, d)
    t = np.linspace(0, 30, 31)
    model = mf.Model(beta=4.0, dim=d)
    p = solvers.Particles(model)
    base = best(lambda: p.solve(x0, t, scheme="euler-normalize", dt=0.1, progress=False), 1)
    adapt = best(lambda: p.solve(x0, t, rtol=1e-6, atol=1e-9, progress=False), 1)
    print(f"phase diagram, one beta (B={B}): adaptive {adapt:.2f} s / euler-normalize {base:.2f} s = {adapt / base:.2f}")

    x = np.asarray(p.solve(x0, t, scheme="euler-normalize", dt=0.1, progress=False).positions)
    gram = best(lambda: np.einsum("...id,...jd->...ij", x, x))
    frac = best(lambda: pd.clustered_fraction(x, 1e-3))
    print(f"clustered pair fraction: {frac * 1e3:.1f} ms / Gram matrices {gram * 1e3:.1f} ms = {frac / gram:.2f}")

    betas = np.linspace(0.9, 9, 60)
    rhs = pd.equiangular_rhs(4.0, 32)
    plain = best(lambda: solve_ivp(rhs, (0, 30), [0.0], rtol=1e-11, atol=1e-13, method="DOP853"))
    curve = best(lambda: [pd.gamma_crossing(b, 32, 1e-3) for b in betas], 1)
    print(f"Gamma curve, 60 betas: {curve:.3f} s / one plain ODE solve {plain * 1e3:.2f} ms = {curve / plain:.0f}")

    y = mf.sampling.uniform_points(12, 3, 0)
    energy = best(lambda: [vp.discrete_energy(y, 6.0) for _ in range(4000)])
    design = best(lambda: vp.minimise_discrete_energy(12, 3, 6.0, starts=4, rng=0), 1)
    print(f"icosahedron search: {design:.3f} s / 4000 energy evaluations {energy:.3f} s = {design / energy:.2f}")


if __name__ == "__main__":
    main()
