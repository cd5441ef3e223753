"""Model-layer costs, as ratios against raw numpy baselines measured in the same run.

    python benchmarks/bench_foundation.py

* interaction_energy for n = 20 000 points on S^2 (O(n²) in chunks) / the time numpy takes for
  exp over the same n² entries in the same chunking (the irreducible work);
* exact circle W1 between two measures of 10^6 atoms / one np.argsort of 2·10^6 floats;
* kernel_multipliers up to l = 2048 / one scipy.special.ive call on the same orders.
"""

import numpy as np
from scipy import special

import meanfield as mf
from _timing import best


def main():
    rng = np.random.default_rng(0)
    n = 20000
    x = rng.standard_normal((n, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = np.full(n, 1.0 / n)
    t_energy = best(lambda: mf.interaction_energy(4.0, (x, w)), repeat=2)

    def raw_exp():
        for s in range(0, n, 2048):
            np.exp(x[s:s + 2048] @ x.T)

    t_exp = best(raw_exp, repeat=2)
    print(f"interaction_energy, n = {n}: {t_energy:.2f} s  (raw exp of the n² Gram entries: {t_exp:.2f} s, "
          f"ratio {t_energy / t_exp:.2f})")

    m = 1_000_000
    a = (np.stack([np.cos(t := rng.uniform(0, 2 * np.pi, m)), np.sin(t)], -1), np.full(m, 1.0 / m))
    b = (np.stack([np.cos(t := rng.uniform(0, 2 * np.pi, m)), np.sin(t)], -1), np.full(m, 1.0 / m))
    t_w1 = best(lambda: mf.wasserstein(a, b), repeat=2)
    z = rng.random(2 * m)
    t_sort = best(lambda: np.argsort(z), repeat=2)
    print(f"circle W1, 2 x 10^6 atoms: {t_w1:.2f} s  (argsort of 2·10^6 floats: {t_sort:.3f} s, ratio {t_w1 / t_sort:.1f})")

    t_k = best(lambda: mf.kernel_multipliers(500.0, 3, 2048, scaled=True), repeat=5)
    orders = np.arange(2049) + 0.5
    t_ive = best(lambda: special.ive(orders, 500.0), repeat=5)
    print(f"kernel_multipliers(500, 3, 2048): {t_k * 1e3:.2f} ms  (raw ive: {t_ive * 1e3:.2f} ms, ratio {t_k / t_ive:.2f})")

    x2, w2 = mf.sample(mf.densities.uniform(), 2000, 3, rng=1)
    y2, v2 = mf.sample(mf.densities.uniform(), 2000, 3, rng=2)
    t_lp = best(lambda: mf.wasserstein((x2, w2), (y2, v2)), repeat=1)
    print(f"S^2 exact W1 (network simplex), 2000 x 2000 atoms: {t_lp:.2f} s")


if __name__ == "__main__":
    main()
