"""Weighted particles whose positions are kept at some saved times only (`solvers.Particles`,
``save="diagnostics"``, ``"ends"`` or a list of times).

A run of many realisations with many saved times mostly needs the diagnostics (energy, clustered
fraction, ...); keeping every position would cost T·B·n·d·8 bytes (158 MB per β for the Figure 3
workload). One saved slice is the positions (n, d) or (B, n, d) where they were kept and None
elsewhere; ``Solution.data`` is the object array of the T slices. ``sol.positions`` is the stacked
array when every time was kept and raises AttributeError (naming the kept times) otherwise;
``sol[i].positions``, ``sol.measure(i)`` and ``sol.state(i)`` work at the kept times. The energy is
recorded by the solver at every saved time (``sol.energy``); computed from positions it is NaN where
they were not kept.

NetCDF layout: ``positions`` on the axis ``kept`` (the saved indices that were kept), ``weights``,
and the attributes of `ParticleCloud` plus ``batch`` (B, or −1 for one cloud).
"""
import numpy as np

from .particles import ParticleCloud
from ..errors import InvalidInput


def saved_slice(positions):
    """One saved slice as a 0-d object array (``np.stack`` of them is the (T,) object array)."""
    out = np.empty((), dtype=object)
    out[()] = positions
    return out


class SampledParticleCloud(ParticleCloud):
    """μ = Σ_j w_j δ_{x_j} with the positions kept at some saved times (module docstring).

    Parameters
    ----------
    weights : (n,); dim : d; domain : "sphere" or "euclidean"; batch : B realisations, or None.
    """

    name = "sampled-particles"

    def __init__(self, weights, dim, domain="sphere", batch=None):
        super().__init__(weights, dim, domain)
        self.batch = None if batch is None or batch < 0 else int(batch)

    def _shape(self):
        n = self.weights.size
        return (n, self.dim) if self.batch is None else (self.batch, n, self.dim)

    @staticmethod
    def kept(data_all):
        """The saved indices whose positions were kept."""
        return np.array([k for k, x in enumerate(data_all) if x is not None], dtype=int)

    def stacked_positions(self, data_all):
        """The positions (T, [B,] n, d) when every saved time was kept."""
        kept = self.kept(data_all)
        if kept.size != len(data_all):
            shown = ", ".join(str(k) for k in kept[:8]) + (", ..." if kept.size > 8 else "")
            raise AttributeError(f"this run kept the positions at {kept.size} of its {len(data_all)} saved times "
                                 f"(indices [{shown}]); use sol[i].positions or sol.measure(i) there, or solve with "
                                 "save='positions'.")
        return np.stack(list(data_all)) if len(data_all) else np.empty((0,) + self._shape())

    def _require(self, data):
        if data is None:
            raise InvalidInput("the positions of this saved time were not kept (solve with save='positions', or list "
                             "this time in `save`).")
        return data

    def energy(self, beta, data):
        """E_β (3.5) where the positions were kept; NaN elsewhere."""
        if data is None:
            return np.nan if self.batch is None else np.full(self.batch, np.nan)
        return super().energy(beta, data)

    def measure(self, data, n=None, batch=None):
        return super().measure(self._require(data), n=n, batch=batch)

    def cell_means(self, data, grid):
        """`ParticleCloud.cell_means` where the positions were kept; NaN elsewhere."""
        if data is None:
            return np.full(grid.shape, np.nan)
        return super().cell_means(data, grid)

    def to_dataset(self, data_all):
        kept = self.kept(data_all)
        x = np.stack([data_all[k] for k in kept]) if kept.size else np.empty((0,) + self._shape())
        dims = ("kept", "particle", "component") if x.ndim == 3 else ("kept", "batch", "particle", "component")
        data_vars = {"positions": (dims, x), "weights": (("particle",), self.weights)}
        attrs = {"representation": self.name, "domain": self.domain, "batch": -1 if self.batch is None else self.batch}
        return data_vars, {"kept": kept}, attrs

    @classmethod
    def from_dataset(cls, ds):
        x = ds["positions"].values
        rep = cls(ds["weights"].values, x.shape[-1], domain=ds.attrs.get("domain", "sphere"),
                  batch=int(ds.attrs.get("batch", -1)))
        data = np.empty(ds["time"].size, dtype=object)
        for k, i in enumerate(np.asarray(ds["kept"].values, dtype=int)):
            data[i] = x[k]
        return rep, data
