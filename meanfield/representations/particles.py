"""Weighted particles: positions (n, d) — or (B, n, d) for B independent realisations — and weights."""
import numpy as np

from ..observables.energy import discrete_energy
from .base import Representation
from ..spaces.gridded import bin_masses
from ..errors import InvalidInput


class ParticleCloud(Representation):
    """μ = Σ_j w_j δ_{x_j}; one time slice of data is positions (n, d) or (B, n, d)."""

    name = "particles"
    is_density = False
    keeps_identity = True
    point_cloud = True

    def resolution_label(self, data=None):
        B = getattr(self, "batch", None) or (np.shape(data)[1] if data is not None and np.ndim(data) == 4 else None)
        return f"n = {self.weights.size} particles" + (f", {B} realisations" if B else "")

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
        return discrete_energy(beta, x, self.weights)     # batches of realisations in one blocked sum

    def measure(self, data, n=None, batch=None):
        x = np.asarray(data)
        if x.ndim == 3:
            if batch is None:
                raise InvalidInput("this Solution holds a batch of realisations; pass `batch=b` to pick one.")
            x = x[batch]
        return x, self.weights

    def cell_means(self, data, grid):
        """The histogram of the weights over the cells of ``grid`` divided by σ(cell) (S^1, S^2): the
        cell means of the empirical measure, whose mass is the total weight exactly. A batch
        (B, n, d) gives the histogram of the mean of its B empirical measures."""

        x = np.asarray(data)
        if self.domain != "sphere":
            raise InvalidInput("`grid`: particles in R^d have no grid on the sphere.")
        reps = 1 if x.ndim == 2 else x.shape[0]
        w = np.broadcast_to(self.weights / reps, x.shape[:-1])
        return bin_masses(grid, x, w) / grid.weights

    def to_dataset(self, data_all):
        x = np.asarray(data_all)
        dims = ("time", "particle", "component") if x.ndim == 3 else ("time", "batch", "particle", "component")
        data_vars = {"positions": (dims, x), "weights": (("particle",), self.weights)}
        return data_vars, {}, {"representation": self.name, "domain": self.domain}

    @classmethod
    def from_dataset(cls, ds):
        x = ds["positions"].values
        return cls(ds["weights"].values, x.shape[-1], domain=ds.attrs.get("domain", "sphere")), x
