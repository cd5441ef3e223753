"""Pictures for docs/normalization.md (run once; the PNG under docs/img/ is committed).

    OPENBLAS_NUM_THREADS=1 python docs/make_normalization_figures.py

* normalization_collapse.png   1 − mean pairwise ⟨θ_j, θ_k⟩ against t for every scheme, n = 32 tokens
                               uniform on S^15 (d = 16), β = 1, "mix" with τ = 2, "ngpt" with α = 1;
                               left in log-log axes, right in linear time.

It prints the rates fitted over the late window of each scheme (the table of docs/normalization.md).
"""
import pathlib

import numpy as np

import meanfield as mf
import solvers
from meanfield.measures.sampling import uniform_points

IMG = pathlib.Path(__file__).resolve().parent / "img"
N, D, BETA = 32, 16, 1.0
T = np.concatenate([[0.0], np.geomspace(0.01, 1000.0, 121)])
# the late window and the variable in which the law is a straight line of log(gap), with its slope
LAWS = {"post": ((6, 12), lambda t: t, -2.0, "e^{-2t}"),
        "pre": ((200, 1000), np.log, -2.0, "t^{-2}"),
        "mix": ((200, 1000), np.log, -2.0, "t^{-2} after τ"),
        "peri": ((200, 1000), np.log, -2.0, "t^{-2}"),
        "ngpt": ((6, 12), lambda t: t, -2.0, "e^{-2αt}"),
        "sqrt-depth": ((30, 150), lambda t: np.sqrt(t + 1), -4.0, "e^{-4√t}")}


def gap(positions):
    """1 − mean pairwise ⟨θ_j, θ_k⟩ (j ≠ k), as the mean of |θ_j − θ_k|²/2."""
    diff = positions[..., :, None, :] - positions[..., None, :, :]
    return 0.5 * np.square(diff).sum((-1, -2, -3)) / (N * (N - 1))


def runs():
    x0 = uniform_points(N, D, np.random.default_rng(0))
    out = {}
    for scheme in LAWS:
        extra = {"mix_depth": 2.0} if scheme == "mix" else {}
        model = mf.Model(BETA, D, normalization=scheme, **extra)
        sol = solvers.Particles(model, diagnostics="none").solve(x0, T, rtol=1e-11, atol=1e-14)
        out[scheme] = gap(sol.positions)
    return out


def main():
    import matplotlib                      # heavy, optional: only for the picture
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gaps = runs()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    print("| normalization | law | fitted slope | law's slope | window |")
    for k, (scheme, g) in enumerate(gaps.items()):
        (a, b), variable, slope, law = LAWS[scheme]
        keep = (T >= a) & (T <= b) & (g > 1e-13)
        fitted = np.polyfit(variable(T[keep]), np.log(g[keep]), 1)[0] if keep.sum() > 2 else np.nan
        print(f"| {scheme} | {law} | {fitted:.3f} | {slope:g} | t in [{a}, {b}] |")
        for ax in axes:
            ax.plot(T[1:], g[1:], color=f"C{k}", label=f"{scheme} ({law})")
    axes[0].set(xscale="log", yscale="log", xlabel="t", ylabel="1 − mean ⟨θ_j, θ_k⟩", ylim=(1e-14, 2),
                title=f"n = {N}, d = {D}, β = {BETA:g}")
    axes[1].set(yscale="log", xlabel="t", xlim=(0, 40), ylim=(1e-14, 2), title="the same, linear time")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    IMG.mkdir(exist_ok=True)
    fig.savefig(IMG / "normalization_collapse.png", dpi=110)


if __name__ == "__main__":
    main()
