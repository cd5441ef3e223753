"""Densities layered in the token position σ ∈ (0, 1]: the state of a causal (masked) run (docs/causal.md).

One time slice is the data of M densities (each in a one-density representation ``base``: Fourier
series on S^1, spherical harmonics on S^2) at the nodes s_i of a `meanfield.transformer.positions.PositionRule`
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

from ..spaces.gridded import POSITION_ATTRS
from ..transformer.positions import PositionRule
from .base import Representation, lookup_representation
from .lagrangian import LagrangianNodes
from ..errors import InvalidInput


def principal_plane(measure):
    """(e_1, e_2): the two leading eigenvectors of A = Σ_i w_i m_i m_iᵀ + Σ_j w_j x_j x_jᵀ for a measure
    (points, weights) Σ_j w_j δ_{x_j} on S^2 (a `JointMeasure`: its points at token positions, else one
    position), m_i the mean of x
    over the points of position i and w_i their weight: the plane in which the means of the positions turn
    (a bump of degree 1 has no second moment beyond the uniform I/3) and the measure spreads most (two
    antipodal clusters have no mean); the uniform part adds a multiple of the identity and moves no
    eigenvector. Each vector has its largest component positive.

    Examples
    --------
    >>> s = np.linspace(0.1, 1.0, 10)
    >>> x = np.stack([np.cos(2 * s), np.sin(2 * s), np.zeros(10)], -1)       # a direction turning with s
    >>> e1, e2 = principal_plane(JointMeasure(x, np.full(10, 0.1), s))
    >>> round(abs(float(e1[2])) + abs(float(e2[2])), 12)
    0.0
    """
    x, w = (np.asarray(a, dtype=float) for a in measure[:2])
    positions = getattr(measure, "positions", None)
    A = np.einsum("j,ja,jb->ab", w, x, x)
    groups = np.zeros(len(w), dtype=int) if positions is None else np.unique(positions, return_inverse=True)[1]
    mass = np.bincount(groups, weights=w)
    sums = np.stack([np.bincount(groups, weights=w * x[:, k]) for k in range(x.shape[1])], -1)
    seen = mass > 0
    A += np.einsum("i,ia,ib->ab", 1.0 / mass[seen], sums[seen], sums[seen])     # Σ_i w_i m_i m_iᵀ
    _, vectors = np.linalg.eigh(A)
    out = []
    for e in (vectors[:, -1], vectors[:, -2]):
        out.append(e if e[np.argmax(np.abs(e))] > 0 else -e)
    return tuple(out)


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

    def position_map(self, data, n=256, position_count=129, plane=None):
        """(σ (P,), angle (n,), ρ (P, n)) on a grid of positions σ ∈ (0, 1] and angles: θ on S^1; on S^2 the
        angle α along the great circle x = cos α e_1 + sin α e_2 of ``plane`` = (e_1, e_2), by default
        `principal_plane` of the joint measure (so that a bump that turns with σ stays on the picture)."""
        sigma = np.linspace(0, 1, int(position_count) + 1)[1:]
        angle = np.linspace(-np.pi, np.pi, int(n), endpoint=False)
        if self.dim == 2:
            x = np.stack([np.cos(angle), np.sin(angle)], -1)
        else:
            e1, e2 = principal_plane(self.measure(data)) if plane is None else plane
            x = np.cos(angle)[:, None] * e1 + np.sin(angle)[:, None] * e2
        return sigma, angle, np.array([self.evaluate(data, x, position=s) for s in sigma])

    def embed(self, data_all, source):
        """Layered data of another resolution (positions resampled, the base's modes padded)."""
        data_all = np.asarray(data_all)
        if source.name != self.name:
            raise InvalidInput(f"cannot carry {source.name!r} data into a layered representation.")
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
                                       "towards sigma = 0 (meanfield.transformer.positions.PositionRule)"})
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


class LayeredNodes(LayeredDensity):
    """Labels in (σ, x): at each node s_i of a position rule, the moving labels of ρ(s_i, ·) (`LagrangianNodes`,
    all positions on the same labels y_j, with masses q_j ρ_0(s_i, y_j)); one time slice is (M, n [+ m], d + 1).

    Between nodes (``position`` not a node) the state of the panel is interpolated in σ at fixed label: the
    flow map Φ_t(σ, y_j) (renormalised onto the sphere), the log-Jacobian and ρ_0(σ, y_j) — a Lagrangian
    state of its own, exact at the nodes. The x-marginal, the joint measure, files and pictures are those
    of `LayeredDensity`; the x-marginal's density is Σ_i w_i ρ(s_i, x).

    Parameters
    ----------
    rule : `meanfield.transformer.positions.PositionRule`; labels (n, d), label_weights (n,) the quadrature q_j.
    rho0 : (M, n) ρ_0(s_i, y_j); companion : None or (labels (m, d), weights (m,), rho0 (M, m)).
    panels, cluster_tol, min_mass : as `LagrangianNodes`.
    """

    name = "layered-lagrangian"
    keeps_identity = True

    def __init__(self, rule, labels, label_weights, rho0, companion=None, panels=None, cluster_tol=1e-3,
                 min_mass=1e-2):
        self.rule = rule
        self.labels = np.asarray(labels, dtype=float)
        self.label_weights = np.asarray(label_weights, dtype=float)
        self.rho0 = np.asarray(rho0, dtype=float)
        self.companion = None if companion is None else tuple(np.asarray(a, dtype=float) for a in companion)
        self.options = dict(panels=panels, cluster_tol=cluster_tol, min_mass=min_mass)
        self.dim, self.n = self.labels.shape[1], self.labels.shape[0]
        self.positions, self.position_weights = rule.nodes, rule.weights
        self.nodes_at = [self._one(r, None if companion is None else self.companion[2][i])
                         for i, r in enumerate(self.rho0)]
        self.base = self.nodes_at[0]

    def resolution_label(self, data=None):
        return f"{self.n} moving nodes per position, M = {len(self.positions)} positions"

    def _one(self, rho0, coarse_rho0):
        companion = None
        if coarse_rho0 is not None:
            labels, q, _ = self.companion
            companion = (labels, q * coarse_rho0, coarse_rho0)
        return LagrangianNodes(self.labels, self.label_weights * rho0, rho0, companion=companion, **self.options)

    @property
    def weights(self):
        """(M, n) the masses of the labels at each node."""
        return self.label_weights * self.rho0

    def at(self, data, position):
        """(`LagrangianNodes`, its slice) of the density at ``position`` (the node's own, or interpolated)."""
        data = np.asarray(data, dtype=float)
        idx, lw = self.rule.interpolation(position)
        hit = np.flatnonzero(lw == 1.0)
        if hit.size:
            return self.nodes_at[idx[hit[0]]], data[idx[hit[0]]]
        one = np.tensordot(lw, data[idx], axes=(0, 0))
        one[:, :self.dim] /= np.linalg.norm(one[:, :self.dim], axis=1, keepdims=True)
        coarse = None if self.companion is None else np.clip(lw @ self.companion[2][idx], 0.0, None)
        return self._one(np.clip(lw @ self.rho0[idx], 0.0, None), coarse), one

    def node_density(self, data):
        """ρ_t(s_i, x_ij) (M, n) at the moving labels."""
        return np.stack([rep.node_density(d) for rep, d in zip(self.nodes_at, np.asarray(data))])

    def _per_position(self, data, position, per_position, one):
        if position is not None:
            return one(*self.at(data, position))
        values = np.array([one(rep, d) for rep, d in zip(self.nodes_at, np.asarray(data))])
        return values if per_position else float(self.position_weights @ values)

    def evaluate(self, data, x, position=None):
        """ρ(σ, x) at ``position``; without it the x-marginal Σ_i w_i ρ(s_i, x)."""
        if position is not None:
            rep, one = self.at(data, position)
            return rep.evaluate(one, x)
        return sum(wi * rep.evaluate(d, x) for wi, rep, d in zip(self.position_weights, self.nodes_at, data))

    def mass(self, data, position=None, per_position=False):
        """Σ_j w_ij at ``position`` (exact, constant in time); per node; or the joint mass."""
        return self._per_position(data, position, per_position, lambda rep, d: rep.mass(d))

    def energy(self, beta, data, position=None, per_position=False):
        """E_β (3.5) of the labels of ρ(σ) at ``position``; per node; or ∫_0^1 E_β(ρ(σ)) dσ."""
        return self._per_position(data, position, per_position, lambda rep, d: rep.energy(beta, d))

    def error_estimate(self, data):
        """The largest W1 distance to the companion over the positions (`LagrangianNodes.error_estimate`)."""
        return max(rep.error_estimate(d) for rep, d in zip(self.nodes_at, np.asarray(data)))

    def power(self, data, position=None):
        raise NotImplementedError("labels have no degree powers; evaluate the density or take its measure.")

    def measure(self, data, n=None, position=None):
        """The labels of ρ(σ) at ``position`` with their masses; without it the `JointMeasure` of all nodes,
        weights w_i (position) × the label masses."""
        if position is not None:
            rep, one = self.at(data, position)
            return rep.measure(one)
        parts = [rep.measure(d) for rep, d in zip(self.nodes_at, np.asarray(data))]
        points = np.concatenate([p for p, _ in parts])
        weights = np.concatenate([wi * w for wi, (_, w) in zip(self.position_weights, parts)])
        return JointMeasure(points, weights, np.repeat(self.positions, self.n))

    def marginal(self, data):
        raise NotImplementedError("the x-marginal of labels is their joint measure (`measure`); its density is "
                                  "`evaluate` without a position.")

    def cell_means(self, data, grid):
        """Σ_i w_i (cell means of ρ(s_i)) (`LagrangianNodes.cell_means`): the x-marginal's, mass exact."""
        return sum(wi * rep.cell_means(d, grid) for wi, rep, d in zip(self.position_weights, self.nodes_at, data))

    def to_grid(self, data, n=None):
        """The x-marginal on the labels' grid (`LagrangianNodes.to_grid`), as a DataArray."""
        return sum(wi * rep.to_grid(d, n) for wi, rep, d in zip(self.position_weights, self.nodes_at, data))

    def embed(self, data_all, source):
        if source is not self:
            raise InvalidInput("labelled layered data continue on their own labels; they are not embedded.")
        return data_all

    def to_dataset(self, data_all):
        a = np.asarray(data_all, dtype=float)
        n, d = self.n, self.dim
        tpn = ("time", "position", "node")
        data_vars = {"positions": (tpn + ("component",), a[:, :, :n, :d]), "log_jacobian": (tpn, a[:, :, :n, d]),
                     "labels": (("node", "component"), self.labels), "label_weight": (("node",), self.label_weights),
                     "rho0": (("position", "node"), self.rho0),
                     "mass_per_position": (("time", "position"), np.repeat(self.weights.sum(1)[None], len(a), 0)),
                     "position_weight": (("position",), self.position_weights),
                     "position_panel_end": (("panel_end",), self.rule.breaks)}
        if self.companion is not None:
            yc, qc, rc = self.companion
            tpc = ("time", "position", "coarse_node")
            data_vars.update({"companion_positions": (tpc + ("component",), a[:, :, n:, :d]),
                              "companion_log_jacobian": (tpc, a[:, :, n:, d]),
                              "companion_labels": (("coarse_node", "component"), yc),
                              "companion_label_weight": (("coarse_node",), qc),
                              "companion_rho0": (("position", "coarse_node"), rc)})
        if self.options["panels"] is not None:
            data_vars["panel_edges"] = (("edge",), self.options["panels"])
        coords = {"position": ("position", self.positions, dict(POSITION_ATTRS))}
        attrs = {"representation": self.name, "dim": d, "positions": len(self.positions),
                 "position_bias": self.rule.lam, "cluster_tol": self.options["cluster_tol"],
                 "min_mass": self.options["min_mass"],
                 "normalisation": "rho(t, s_i, positions_ij) = rho0_ij * exp(-log_jacobian_ij) relative to sigma; "
                                  "mu_t(s_i) = sum_j label_weight_j rho0_ij delta_{positions_ij}"}
        return data_vars, coords, attrs

    @classmethod
    def from_dataset(cls, ds):
        data = np.concatenate([ds["positions"].values, ds["log_jacobian"].values[..., None]], axis=-1)
        companion = None
        if "companion_labels" in ds:
            companion = (ds["companion_labels"].values, ds["companion_label_weight"].values, ds["companion_rho0"].values)
            cdata = np.concatenate([ds["companion_positions"].values, ds["companion_log_jacobian"].values[..., None]], -1)
            data = np.concatenate([data, cdata], axis=2)
        rule = PositionRule(int(ds.attrs["positions"]), float(ds.attrs["position_bias"]),
                            ds["position_panel_end"].values)
        rep = cls(rule, ds["labels"].values, ds["label_weight"].values, ds["rho0"].values, companion,
                  ds["panel_edges"].values if "panel_edges" in ds else None, float(ds.attrs["cluster_tol"]),
                  float(ds.attrs["min_mass"]))
        return rep, data


__all__ = ["JointMeasure", "LayeredDensity", "LayeredNodes", "principal_plane"]
