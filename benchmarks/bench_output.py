"""Writing a run's file: the coefficients alone against the cell-mean grid and the cluster trajectories.

    python benchmarks/bench_output.py [--quick]

For the saved runs of ``examples/sphere.toml`` (SphericalHarmonics, lmax = 63, 21 saved times) and of
``examples/fourier_modes.toml`` (Lagrangian, 1024 labels, 49 saved times) — each computed once here —
times `Solution.save` as ``meanfield run`` calls it: ``save(path)`` (the coefficients or nodes: the
baseline), ``save(path, grid=True)`` (the cell means of every saved time) and ``save(path, grid=True,
clusters=True)`` (with the cluster trajectories), interleaved (minimum of the repeats), as ratios to the
baseline measured in the same run.
"""
import pathlib
import sys
import tempfile

from _timing import interleaved
from meanfield.experiments.config import load_config
from meanfield.experiments.run import simulate

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    repeat = 2 if "--quick" in sys.argv else 5
    with tempfile.TemporaryDirectory() as tmp:
        for example in ("sphere", "fourier_modes"):
            cfg = load_config(ROOT / "examples" / f"{example}.toml")
            sol = simulate(cfg, progress=False)
            path = pathlib.Path(tmp) / f"{example}.nc"
            base, grid, both = interleaved([lambda: sol.save(path), lambda: sol.save(path, grid=True),
                                            lambda: sol.save(path, grid=True, clusters=True)], repeat)
            print(f"{example} ({sol.solver}, {sol.t.size} saved times): save {base:.3f} s; grid=True {grid:.3f} s "
                  f"(ratio {grid / base:.2f}); grid=True, clusters=True {both:.3f} s (ratio {both / base:.2f})")


if __name__ == "__main__":
    main()
