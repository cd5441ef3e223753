"""Pictures for docs/causal.md (run once; the PNGs under docs/img/ are committed).

    OPENBLAS_NUM_THREADS=1 python docs/make_causal_figures.py

* causal_positions.png     the layered run of docs/causal.md's first example, longer: ρ over (θ, σ)
                           at three times ((SA), β = 4, λ = 1, 256 modes, 32 positions);
* lost_in_the_middle.png   the picture of ``meanfield lost-in-the-middle --quick --no-particles``.
"""
import pathlib
import shutil
import tempfile

import numpy as np

import meanfield as mf
import solvers
from meanfield.experiments import lost_in_the_middle

IMG = pathlib.Path(__file__).resolve().parent / "img"


def rho0(x, s):
    theta = np.arctan2(x[..., 1], x[..., 0])
    return 1 + 0.3 * np.cos(theta - 3 * s) + 0.2 * np.cos(3 * theta)


def main():
    model = mf.Model(beta=4.0, dim=2, mask="causal", position_bias=1.0)
    sol = solvers.FourierCircle(model, 256, positions=32).solve(rho0, np.linspace(0, 3, 7))
    sol.plot(path=IMG / "causal_positions.png")
    with tempfile.TemporaryDirectory() as out:
        lost_in_the_middle(out, quick=True, particles=False, progress=False)
        shutil.copy(pathlib.Path(out) / "lost_in_the_middle.png", IMG / "lost_in_the_middle.png")


if __name__ == "__main__":
    main()
