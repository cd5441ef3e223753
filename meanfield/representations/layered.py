"""Densities layered in the token position σ ∈ (0, 1]: the state of a causal (masked) run (docs/causal.md).

One time slice is the data of M densities (each in a one-density representation ``base``: Fourier
series on S^1, spherical harmonics on S^2) at the nodes s_i of a `meanfield.positions.PositionRule`
(axis 0). Between nodes a density is the degree-7 interpolant of its panel in σ (linear in the data).

* ``evaluate(data, x, position=s)``, ``measure(data, position=s)``, ``mass``, ``energy``, ``power``: one
  position; without ``position``: ``evaluate`` the x-marginal ∫_0^1 ρ(σ, x) dσ, ``measure`` the joint
  measure on (0, 1] × S^{d−1} (`JointMeasure`: its points on the sphere with weights w_i·w_j and the
  position of each point), ``mass`` and ``energy`` the means over σ (``per_position=True``: one per node).
* Files: the base's variables with a ``position`` dimension after ``time``; the ``position``
  coordinate (CF, units "1"), ``position_weight`` and ``mass_per_position``; with ``grid=True`` the
  cell means of the x-marginal.
* ``positions``: the nodes s_i, the capability by which plotting and files recognise a layered state.
"""
import numpy as np

from ..gridded import POSITION_ATTRS
from ..positions import PositionRule
from .base import Representation, lookup_representation


class JointMeasure(tuple):
    """The joint measure Σ w_j δ_{(σ_j, x_j)} on (0, 1] × S^{d−1}: unpacks as (points (n, d), weights (n,))
    like any measure of the package (its x-marginal); ``positions`` (n,) the σ_j."""

    def __new__(cls, points, weights, positions):
        self = super().__new__(cls, (points, weights))
        self.positions = positions
        return self

    def __getnewargs__(self):
        return self[0], self[1], self.positions


class LayeredDensity(Representation):
    """M densities of one representation at the nodes of a position rule (module docstring)."""

    name = "layered"
    layered = True

    def resolution_label(self, data=None):
        return f"{self.base.resolution_label()}, M = {len(self.positions)} positions"

    def __init__(self, base, rule):
        self.base, self.rule = base, rule
        self.dim = base.dim
        self.positions = rule.nodes
        self.position_weights = rule.weights
        for resolution in ("modes", "lmax"):          # the spectral resolution, read by the solvers' "auto"
            if hasattr(base, resolution):
                setattr(self, resolution, getattr(base, resolution))

    def at(self, data, position):
        """The one-density data at ``position`` (interpolated in σ)."""
        return self.rule.interpolate(np.asarray(data), position)

    def evaluate(self, data, x, position=None):
        """ρ(σ, x) at ``position``; without it the x-marginal ∫_0^1 ρ(σ, x) dσ."""
        if position is None:
            return self.base.evaluate(self.marginal(data), x)
        return self.base.evaluate(self.at(data, position), x)

    def _per_position(self, data, position, per_position, one):
        if position is not None:
            return one(self.at(data, position))
        values = np.array([one(d) for d in np.asarray(data)])
        return values if per_position else float(self.position_weights @ values)

    def mass(self, data, position=None, per_position=False):
        """∫ρ(σ) dσ_x at ``position``; one per node with ``per_position``; else the joint mass ∫∫ρ dσ_x dσ."""
        return self._per_position(data, position, per_position, self.base.mass)

    def energy(self, beta, data, position=None, per_position=False):
        """E_β (3.5) of ρ(σ) at ``position``; one per node with ``per_position``; else ∫_0^1 E_β(ρ(σ)) dσ."""
        return self._per_position(data, position, per_position, lambda d: self.base.energy(beta, d))

    def power(self, data, position=None):
        """Degree powers at ``position``, or (M, L + 1) at the nodes."""
        if position is not None:
            return self.base.power(self.at(data, position))
        return np.stack([self.base.power(d) for d in np.asarray(data)])

    def measure(self, data, n=None, position=None):
        """The measure of ρ(σ) at ``position`` (the base's quadrature, about n points); without it the
        `JointMeasure` of all nodes, weights w_i (position) × the base's weights."""
        if position is not None:
            return self.base.measure(self.at(data, position), n=n)
        parts = [self.base.measure(d, n=n) for d in np.asarray(data)]
        points = np.concatenate([p for p, _ in parts])
        weights = np.concatenate([wi * w for wi, (_, w) in zip(self.position_weights, parts)])
        positions = np.repeat(self.positions, [len(w) for _, w in parts])
        return JointMeasure(points, weights, positions)

    def marginal(self, data):
        """The one-density data of the x-marginal ∫_0^1 ρ(σ, ·) dσ (linear in the data)."""
        return np.tensordot(self.position_weights, np.asarray(data), axes=(0, 0))

    @property
    def default_cells(self):
        return self.base.default_cells

    def cell_means(self, data, grid):
        """The cell means of the x-marginal (what ``Solution.save(grid=True)`` writes: mass conserved)."""
        return self.base.cell_means(self.marginal(data), grid)

    def to_grid(self, data, n=None):
        """The x-marginal on the base's grid, as a DataArray."""
        return self.base.to_grid(self.marginal(data), n)

    def position_map(self, data, n=256, position_count=129):
        """(σ (P,), angle (n,), ρ (P, n)) on a grid of positions σ ∈ (0, 1] and angles: θ on S^1; on S^2
        the angle α along the great circle x = (sin α, 0, cos α) through the poles."""
        sigma = np.linspace(0, 1, int(position_count) + 1)[1:]
        angle = np.linspace(-np.pi, np.pi, int(n), endpoint=False)
        if self.dim == 2:
            x = np.stack([np.cos(angle), np.sin(angle)], -1)
        else:
            x = np.stack([np.sin(angle), np.zeros_like(angle), np.cos(angle)], -1)
        return sigma, angle, np.array([self.evaluate(data, x, position=s) for s in sigma])

    def embed(self, data_all, source):
        """Layered data of another resolution (positions resampled, the base's modes padded)."""
        data_all = np.asarray(data_all)
        if source.name != self.name:
            raise ValueError(f"cannot carry {source.name!r} data into a layered representation.")
        if source.rule.size != self.rule.size:
            data_all = np.stack([source.rule.resample(d, self.rule) for d in data_all])
        T, M = data_all.shape[:2]
        flat = self.base.embed(data_all.reshape((T * M,) + data_all.shape[2:]), source.base)
        return flat.reshape((T, M) + flat.shape[1:])

    def to_dataset(self, data_all):
        data_all = np.asarray(data_all)
        T, M = data_all.shape[:2]
        base_vars, coords, base_attrs = self.base.to_dataset(data_all.reshape((T * M,) + data_all.shape[2:]))
        data_vars = {}
        for key, (dims, values) in base_vars.items():
            values = np.asarray(values)
            data_vars[key] = (("time", "position") + tuple(dims[1:]), values.reshape((T, M) + values.shape[1:]))
        masses = np.array([[self.base.mass(d) for d in slice_] for slice_ in data_all])
        data_vars["mass_per_position"] = (("time", "position"), masses)
        data_vars["position_weight"] = (("position",), self.position_weights)
        data_vars["position_panel_end"] = (("panel_end",), self.rule.breaks)
        coords = dict(coords)
        coords["position"] = ("position", self.positions, dict(POSITION_ATTRS))
        attrs = {f"base_{k}" if k == "representation" else k: v for k, v in base_attrs.items()}
        attrs.update({"representation": self.name, "positions": M, "position_bias": self.rule.lam,
                      "position_rule": "composite Gauss-Legendre in sigma, 8 nodes per panel, panels graded "
                                       "towards sigma = 0 (meanfield.positions.PositionRule)"})
        return data_vars, coords, attrs

    @classmethod
    def from_dataset(cls, ds):
        import xarray as xr  # deferred: xarray is heavy

        T, M = ds.sizes["time"], ds.sizes["position"]
        flat_vars = {}
        for key, var in ds.data_vars.items():
            if var.dims[:2] == ("time", "position") and key != "mass_per_position":
                flat_vars[key] = (("time",) + var.dims[2:], var.values.reshape((T * M,) + var.shape[2:]))
        attrs = dict(ds.attrs, representation=ds.attrs["base_representation"])
        base_cls = lookup_representation(attrs["representation"])
        base, flat = base_cls.from_dataset(xr.Dataset(flat_vars, attrs=attrs))
        rule = PositionRule(int(ds.attrs["positions"]), float(ds.attrs["position_bias"]),
                            ds["position_panel_end"].values)
        return cls(base, rule), np.asarray(flat).reshape((T, M) + np.shape(flat)[1:])


__all__ = ["JointMeasure", "LayeredDensity"]
