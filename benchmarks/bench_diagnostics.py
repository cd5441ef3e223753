"""The cluster diagnostics of a saved time against the exp floor.

    python benchmarks/bench_diagnostics.py [--quick]

For the batches of the phase diagram (B = 1024 clouds of n = 32 points on S^2, once uniform and once
gathered around 4 centres), times

* `count_clusters` at δ = 1e-2 (what ``phase-diagram`` records at every saved time): the compiled
  union–find (one pass per cloud, memory O(n)) and its numpy twin (transitive closure by repeated
  squaring of the B × n × n adjacency, ``meanfield.sums.compiled.ENABLED = False``);
* `clustered_pair_fraction` at δ = 1e-3,

each divided by ``np.exp`` over B·n² = 2^20 float64 measured in the same run, interleaved with it
(minimum of the repeats). Both counts agree (checked here and in tests/test_properties.py).
"""
import sys

import numpy as np

from _timing import interleaved
from meanfield.sums import compiled
from meanfield.observables.diagnostics import clustered_pair_fraction, count_clusters


def _numpy_twin(x, delta):
    compiled.ENABLED = False
    try:
        return count_clusters(x, delta)
    finally:
        compiled.ENABLED = True


def main():
    repeat = 3 if "--quick" in sys.argv else 10
    B, n, d = 1024, 32, 3
    rng = np.random.default_rng(0)
    uniform = rng.standard_normal((B, n, d))
    centres = rng.standard_normal((B, 4, d))
    gathered = np.take_along_axis(centres, rng.integers(0, 4, (B, n, 1)).repeat(d, -1), axis=1)
    gathered += 0.05 * rng.standard_normal((B, n, d))
    floor_input = rng.random(B * n * n)
    print(f"saved-time diagnostics, B = {B} clouds of n = {n} points on S^2, against np.exp over B*n^2 = 2^20 doubles")
    for name, x in (("uniform", uniform), ("gathered", gathered)):
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
        assert np.array_equal(count_clusters(x, 1e-2), _numpy_twin(x, 1e-2))
        floor, compiled, twin, pairs = interleaved(
            [lambda: np.exp(floor_input), lambda: count_clusters(x, 1e-2), lambda: _numpy_twin(x, 1e-2),
             lambda: clustered_pair_fraction(x, 1e-3)], repeat)
        print(f"  {name:8s}: exp floor {floor * 1e3:.3f} ms; count_clusters compiled {compiled * 1e3:.3f} ms "
              f"(ratio {compiled / floor:.2f}), numpy twin {twin * 1e3:.3f} ms (ratio {twin / floor:.2f}, "
              f"{twin / compiled:.1f}x the compiled); clustered_pair_fraction {pairs * 1e3:.3f} ms "
              f"(ratio {pairs / floor:.2f}); clusters per cloud {count_clusters(x, 1e-2).mean():.2f}")


if __name__ == "__main__":
    main()
