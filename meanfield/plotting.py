"""Pictures of solutions: the representation's natural panel plus the energy against time."""
import numpy as np


def _pyplot():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg") and not _has_display():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _has_display():
    import os

    return bool(os.environ.get("DISPLAY") or os.environ.get("MPLBACKEND"))


def plot_solution(sol, times=None, path=None, show_energy=True):
    """Draw ``sol``: space-time map (S^1), Mollweide maps (S^2), particles, FEM field, and E_β(t).

    Returns the matplotlib Figure; writes it to ``path`` (PNG/PDF/SVG) when given.
    """
    plt = _pyplot()
    fig = plt.figure(figsize=(11, 4.2))
    sol.representation.plot_state(fig, sol.data, sol.t, times=times)
    if show_energy:
        ax = fig.add_subplot(1, 2, 2)
        plot_energy(sol, ax)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def plot_energy(sol, ax):
    from .energy import dirac_energy, uniform_energy

    e = np.asarray(sol.energy)
    ax.plot(sol.t, e, "-", lw=1.5, label=r"$E_\beta$")
    if sol.model.beta > 0 and sol.model.dim in (2, 3):
        lo, hi = uniform_energy(sol.model.beta, sol.model.dim), dirac_energy(sol.model.beta)
        ax.axhline(lo, color="C2", ls="--", lw=1, label=r"uniform $a_0/2\beta$ (min)")
        top = float(np.nanmax(e)) if np.size(e) else lo
        if hi <= lo + 3 * (top - lo):      # draw the Dirac value only when it is on the same scale
            ax.axhline(hi, color="C3", ls=":", lw=1, label=r"Dirac $e^\beta/2\beta$ (max)")
        else:
            ax.plot([], [], " ", label=rf"Dirac max $e^\beta/2\beta$ = {hi:.4g}")
    ax.set_xlabel("t")
    ax.set_ylabel(r"$E_\beta$")
    ax.set_title("interaction energy (3.5)")
    ax.legend(fontsize=8)
    return ax
