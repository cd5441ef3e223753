"""meanfield.sums.kernelsums: the blocked kernel sums against the exp floor.

    python benchmarks/bench_kernelsums.py [--quick] [--threads N]

For n = 4096 unit vectors in d = 3, times

* `kernel_sums(x, x, F, β)` with F_j = [w_j x_j, w_j] (p = 4, the (SA) particle sums), for chunk
  512/1024/4096 and the three shifts (β = 4 for each shift forced; then β = 400, where "auto" is the
  fixed shift and the exponents reach −800 and are clamped; and β = 200 with M = diag(1, 2, ½), where
  it is the running log-sum-exp);
* `kernel_energy(β, x, w)` (p = 1, the energy's double sum) for chunk 1024/2048/4096,

each divided by ``np.exp`` over an n×n float64 array measured in the same run, interleaved with it
(minimum of the repeats). A ratio near 1 means the sums cost one exponential per pair. ``--threads N``
sets the BLAS/OpenMP thread count (on a loaded machine, several BLAS threads make the small
per-block matmuls much slower; 1 is the fair setting there).
"""
import os
import sys

if "--threads" in sys.argv:
    _n = sys.argv[sys.argv.index("--threads") + 1]
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = _n

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _timing import interleaved  # noqa: E402

from meanfield.sums.kernelsums import kernel_energy, kernel_sums  # noqa: E402


def main():
    quick = "--quick" in sys.argv
    repeat = 2 if quick else 5
    n = 4096
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    w = np.full(n, 1.0 / n)
    F = np.concatenate([x * w[:, None], w[:, None]], axis=1)
    a = rng.random((n, n))
    M = np.diag([1.0, 2.0, 0.5])

    cases = {}
    for chunk in (512, 1024, 4096):
        for shift in ("none", "fixed", "running"):
            cases[f"sums beta=4 {shift:7s} chunk {chunk}"] = (
                lambda chunk=chunk, shift=shift: kernel_sums(x, x, F, 4.0, shift=shift, chunk=chunk))
        cases[f"sums beta=400 auto (fixed) chunk {chunk}"] = lambda chunk=chunk: kernel_sums(x, x, F, 400.0, chunk=chunk)
        cases[f"sums beta=200 M auto (running) chunk {chunk}"] = (
            lambda chunk=chunk: kernel_sums(x, x, F, 200.0, M=M, chunk=chunk))
    for chunk in (1024, 2048, 4096):
        cases[f"energy beta=4 chunk {chunk}"] = lambda chunk=chunk: kernel_energy(4.0, x, w, chunk=chunk)

    names = list(cases)
    times = interleaved([lambda: np.exp(a)] + [cases[k] for k in names], repeat)
    base = times[0]
    threads = os.environ.get("OPENBLAS_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "unset"))
    print(f"n = {n}, d = 3, BLAS threads {threads}; baseline np.exp over {n}x{n} float64: {base * 1e3:.1f} ms")
    for k, t in zip(names, times[1:]):
        print(f"    {k:45s} {t * 1e3:8.1f} ms   ratio {t / base:5.2f}")


if __name__ == "__main__":
    main()
