"""FourierCircle costs, as ratios against an FFT baseline measured in the same run.

    python benchmarks/bench_fourier.py

* one right-hand-side evaluation (SA and USA) / one complex FFT (scipy.fft.fft) of the padded grid
  (M >= 3K + 1 points), for K = modes = 256, 1024, 4096 (target: <= 10 at 4096);
* steps per second of the adaptive integrator (dopri5, 6 right-hand sides per step, plus the tail
  monitor) on the README example;
* the end-to-end time of the README example: β = 4, SA, modes = 256, a two-bump von Mises
  mixture, t in [0, 5] with 51 saved times (diagnostics including W1 at each).
"""
import time

import numpy as np
import scipy.fft as sfft

import meanfield as mf
import solvers
from meanfield.measures import densities as D


def best(fn, number, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return min(times)


def readme_density():
    return D.mixture([D.von_mises_fisher([1.0, 0.0], 1.0), D.von_mises_fisher([-1.0, 0.0], 1.0)], [0.5, 0.5])


def main():
    rho0 = D.mixture([D.von_mises_fisher([1.0, 0.0], 2.0), D.von_mises_fisher([np.cos(2.0), np.sin(2.0)], 3.0)],
                     [0.6, 0.4])
    print("right-hand side / one complex FFT of the padded grid (M points)")
    for K in (256, 1024, 4096):
        row = []
        for sa in (True, False):
            solver = solvers.FourierCircle(mf.Model(beta=4.0, dim=2, normalized=sa), modes=K, w1=False)
            run = solver.start(rho0)
            number = max(20, 200000 // K)
            t_rhs = best(lambda: run.rhs(0.0, run.y0), number)
            z = np.random.default_rng(0).standard_normal(solver.M) + 0j
            t_fft = best(lambda: sfft.fft(z), number)
            row.append((t_rhs, t_fft, solver.M))
        (sa_rhs, fft, M), (usa_rhs, _, _) = row
        print(f"  K = {K:5d}, M = {M:6d}: SA {sa_rhs * 1e6:8.1f} us = {sa_rhs / fft:5.2f} FFTs, "
              f"USA {usa_rhs * 1e6:8.1f} us = {usa_rhs / fft:5.2f} FFTs  (one FFT: {fft * 1e6:.1f} us)")

    model = mf.Model(beta=4.0, dim=2)
    t_eval = np.linspace(0.0, 5.0, 51)
    t0 = time.perf_counter()
    sol = solvers.FourierCircle(model, modes=256, w1=False).solve(readme_density(), t_eval, progress=False)
    t_plain = time.perf_counter() - t0
    st = sol.stats
    print(f"README example without W1 (beta=4, SA, modes=256, t in [0, 5]): {t_plain:.2f} s, "
          f"{st['nsteps']} steps, {st['nsteps'] / t_plain:.0f} steps/s, {st['nfev'] / t_plain:.0f} rhs/s")
    t0 = time.perf_counter()
    sol = solvers.FourierCircle(model, modes=256).solve(readme_density(), t_eval, progress=False)
    t_full = time.perf_counter() - t0
    print(f"README example end to end (all diagnostics incl. W1 at 51 saved times): {t_full:.2f} s; "
          f"E(5) = {sol.energy[-1]:.6f}, max spectral tail {sol.diagnostics['spectral_tail'].max():.2e}")
    t0 = time.perf_counter()
    auto = solvers.FourierCircle(model, modes="auto", w1=False).solve(rho0, t_eval, progress=False)
    print(f"modes='auto' on a sharper two-bump density, t in [0, 5]: {time.perf_counter() - t0:.2f} s, "
          f"final modes {auto.representation.modes}, {auto.stats['nsteps']} steps")
    noisy_near_equilibrium()


def noisy_near_equilibrium():
    """The default tolerances are not a stability device: a noisy 16-mode run relaxing to uniform,
    with the defaults (atol 1e-10 and the advective step cap) against the former atol = 1e-13."""
    model = mf.Model(beta=1.0, dim=2, noise=0.2)
    rho0, t_eval = D.perturbed_uniform(0.3, 1), np.linspace(0.0, 100.0, 21)
    runs = {}
    for label, opts in (("defaults", {}), ("atol=1e-13 (former default)", {"atol": 1e-13}),
                        ("atol=1e-8", {"atol": 1e-8})):
        t0 = time.perf_counter()
        sol = solvers.FourierCircle(model, modes=16, w1=False).solve(rho0, t_eval, progress=False, **opts)
        runs[label] = (time.perf_counter() - t0, sol)
    ref = runs["atol=1e-13 (former default)"][1].data
    base = runs["defaults"][0]
    print("noisy run near equilibrium (SA, beta=1, nu=0.2, modes=16, t in [0, 100]):")
    for label, (wall, sol) in runs.items():
        print(f"  {label:28s} {wall:6.2f} s = {wall / base:4.2f} x defaults, {sol.stats['nsteps']:6d} steps, "
              f"max |c - c(atol=1e-13)| = {np.max(np.abs(sol.data - ref)):.1e}")


if __name__ == "__main__":
    main()
