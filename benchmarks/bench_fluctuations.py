"""meanfield.fluctuations: the cost of an ensemble and of its statistics (docs/fluctuations.md).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_fluctuations.py [--quick]

* the ensemble of issue 44's acceptance: n = 2000, 400 realisations, (USA) on S^1 at β = 1, 17 saved times
  in [0, 4] (`fluctuations.ensemble`, batches of 83 realisations, spectral kernel sums);
* its statistics alone on the same positions: Fourier powers and the FFT pair correlation of
  400 × 17 clouds of 2000 tokens (`cloud_statistics`), with and without the pair moments (P = 12);
* the same for a batch on S^2 (Gram matrices, O(n²) per cloud): 8 clouds of 2000 tokens;
* one onset run at n = 10^5 (121 saved times up to 2 t_* + 4).

Each figure is the best of ``repeat`` runs next to the exp floor (`np.exp` over 10^6 doubles) measured
in the same run. Report the load (``uptime``) with the figures; on a loaded machine they are not a
measurement.
"""
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

import meanfield as mf  # noqa: E402
from meanfield import fluctuations  # noqa: E402
from meanfield.experiments.fluctuations import onset_runs  # noqa: E402
from meanfield.fluctuations.ensemble import cloud_statistics  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _timing import best  # noqa: E402


def main(quick=False):
    repeat = 1
    floor = best(lambda: np.exp(np.linspace(0, 1, 10 ** 6)), 5)
    print(f"load {os.getloadavg()[0]:.2f}; exp floor {1e3 * floor:.2f} ms")
    model = mf.Model(beta=1.0, dim=2, normalized=False)
    n, R = (500, 100) if quick else (2000, 400)
    t = np.linspace(0.0, 4.0, 17)
    sec = best(lambda: fluctuations.ensemble(model, n, R, t, rng=0), repeat)
    print(f"ensemble n = {n}, R = {R}, {t.size} saved times: {sec:.1f} s")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((t.size, 50, n, 2))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    modes = np.arange(1, 5)
    for P in (0, 12):
        sec = best(lambda: cloud_statistics(x, modes, 65, P), 3)
        print(f"statistics of {t.size} x 50 clouds of {n} tokens on S^1 (pair_modes={P}): {sec:.3f} s "
              f"({1e6 * sec / (t.size * 50):.0f} us per cloud)")
    y = rng.standard_normal((1, 8, n, 3))
    y /= np.linalg.norm(y, axis=-1, keepdims=True)
    sec = best(lambda: cloud_statistics(y, modes, 30), 1)
    print(f"statistics of 8 clouds of {n} tokens on S^2 (Gram): {sec:.2f} s ({1e3 * sec / 8:.0f} ms per cloud)")
    N = 10 ** 4 if quick else 10 ** 5
    sec = best(lambda: onset_runs(model, [N], 1, np.random.default_rng(1)), 1)
    print(f"one onset run, n = {N}: {sec:.1f} s")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
