"""Weighted particles: positions (n, d) — or (B, n, d) for B independent realisations — and weights."""
import numpy as np

from ..energy import _discrete_energy
from .base import Representation


class ParticleCloud(Representation):
    """μ = Σ_j w_j δ_{x_j}; one time slice of data is positions (n, d) or (B, n, d)."""

    name = "particles"
    is_density = False

    def __init__(self, weights, dim, domain="sphere"):
        self.weights = np.asarray(weights, dtype=float)
        self.dim = int(dim)
        self.domain = str(domain)   # "sphere" or "euclidean" (R^d dynamics, docs/mathematics.md §1: no E_β)

    def evaluate(self, data, x):
        raise AttributeError("a particle Solution has no density; use sol.positions or sol.measure(i)")

    def mass(self, data):
        return float(self.weights.sum())

    def energy(self, beta, data):
        """E_β (3.5) of Σ w_j δ_{x_j}; one value per realisation for (B, n, d); NaN off the sphere."""
        x = np.asarray(data)
        if self.domain != "sphere":
            return np.nan if x.ndim == 2 else np.full(x.shape[0], np.nan)
        return _discrete_energy(beta, x, self.weights)     # batches of realisations in one blocked sum

    def measure(self, data, n=None, batch=None):
        x = np.asarray(data)
        if x.ndim == 3:
            if batch is None:
                raise ValueError("this Solution holds a batch of realisations; pass `batch=b` to pick one.")
            x = x[batch]
        return x, self.weights

    def to_dataset(self, data_all):
        x = np.asarray(data_all)
        dims = ("time", "particle", "component") if x.ndim == 3 else ("time", "batch", "particle", "component")
        data_vars = {"positions": (dims, x), "weights": (("particle",), self.weights)}
        return data_vars, {}, {"representation": self.name, "domain": self.domain}

    @classmethod
    def from_dataset(cls, ds):
        x = ds["positions"].values
        return cls(ds["weights"].values, x.shape[-1], domain=ds.attrs.get("domain", "sphere")), x

    def plot_state(self, fig, data_all, t, times=None):
        x = np.asarray(data_all)
        if x.ndim == 4:
            x = x[:, 0]
        if self.dim == 3:
            ax = fig.add_subplot(1, 2, 1, projection="3d")
            u, v = np.mgrid[0:2 * np.pi:40j, 0:np.pi:20j]
            ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", lw=0.3)
            n = x.shape[1]
            for j in range(min(n, 400)):
                ax.plot(x[:, j, 0], x[:, j, 1], x[:, j, 2], lw=0.6, alpha=0.6)
            ax.scatter(x[-1, :, 0], x[-1, :, 1], x[-1, :, 2], s=6, c="k")
            ax.set_box_aspect((1, 1, 1))
            ax.set_title("trajectories on $S^2$")
        else:
            ax = fig.add_subplot(1, 2, 1)
            if self.dim == 2:
                theta = np.mod(np.arctan2(x[..., 1], x[..., 0]), 2 * np.pi)
                ax.plot(theta, np.asarray(t), ".", ms=1, color="k")
                ax.set_xlabel(r"$\theta$")
                ax.set_ylabel("t")
                ax.set_title("particle angles on $S^1$")
            else:
                g = np.einsum("tid,tjd->tij", x, x)
                ax.plot(np.asarray(t), g.reshape(len(t), -1)[:, :: max(1, g.shape[1] ** 2 // 200)], lw=0.5)
                ax.set_xlabel("t")
                ax.set_ylabel(r"$\langle x_i, x_j\rangle$")
        return ax
