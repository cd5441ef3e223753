"""Continuous piecewise-linear (P1) densities on a piecewise-flat mesh of S^1 or S^2.

The mesh Γ_h (a regular polygon or a geodesic icosphere, `solvers.meshes`) has its vertices on the
sphere and flat cells. A density is stored by its nodal values ρ_i; in between it is linear on each
flat cell, and a point x of the sphere is read through the cell that the ray R_+·x crosses (radial
projection). Integrals use the lumped (vertex) quadrature of Γ_h normalised to a probability:

    w_i = m_i / |Γ_h|,  m_i = Σ_{K∋i} |K|/(tdim+1),  so  ∫ρ dσ_h = Σ_i w_i ρ_i,

i.e. σ_h is the normalised area (length) measure of the *discrete* surface (|Γ_h| = |S^{d-1}|(1+O(h²))).
"""
import numpy as np
from scipy.spatial import cKDTree

from ..observables.energy import discrete_energy
from ..spaces.quadrature import gauss_gegenbauer
from .base import Representation
from ..spaces.gridded import ugrid_variables
from ..errors import InvalidInput


def lumped_weights(vertices, cells):
    """Lumped P1 mass Σ_{K∋i} |K|/(tdim+1) of each vertex (sums to |Γ_h|)."""
    x = vertices[cells]
    if cells.shape[1] == 2:
        meas = np.linalg.norm(x[:, 1] - x[:, 0], axis=1)
    else:
        meas = 0.5 * np.linalg.norm(np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0]), axis=1)
    k = cells.shape[1]
    return np.bincount(cells.ravel(), weights=np.repeat(meas / k, k), minlength=len(vertices))


class P1Field(Representation):
    """Nodal values ρ_i (one slice of data: shape (N,)) of a P1 density on the mesh (vertices, cells).

    ``vertices`` (N, d) lie on S^{d-1}; ``cells`` (M, 2) segments (d = 2) or (M, 3) triangles (d = 3).
    """

    name = "p1"
    on_mesh = True

    def resolution_label(self, data=None):
        return f"P1 mesh of {len(self.vertices)} vertices"

    def __init__(self, vertices, cells):
        self.vertices = np.ascontiguousarray(vertices, dtype=float)
        self.cells = np.ascontiguousarray(cells, dtype=np.int64)
        self.dim = self.vertices.shape[1]
        if self.dim not in (2, 3) or self.cells.shape[1] != self.dim:
            raise InvalidInput(f"`cells` must be segments on S^1 or triangles on S^2, got cells of shape "
                             f"{self.cells.shape} with vertices of shape {self.vertices.shape}.")
        m = lumped_weights(self.vertices, self.cells)
        self.area = float(m.sum())
        self.weights = m / self.area
        self._locator = None

    # -- point location ------------------------------------------------------------------------------
    def _locate(self, x):
        """(cell index, barycentric coordinates) of the ray through each point of x (n, d)."""
        if self.dim == 2:
            return self._locate_circle(x)
        return self._locate_sphere(x)

    def _locate_circle(self, x):
        if self._locator is None:
            a, b = self.vertices[self.cells[:, 0]], self.vertices[self.cells[:, 1]]
            ta = np.mod(np.arctan2(a[:, 1], a[:, 0]), 2 * np.pi)
            tb = np.mod(np.arctan2(b[:, 1], b[:, 0]), 2 * np.pi)
            ccw = np.mod(tb - ta, 2 * np.pi) < np.pi
            start = np.where(ccw, ta, tb)                     # each segment spans [start, start + Δ) ccw
            order = np.argsort(start)
            self._locator = (start[order], order)
        start, order = self._locator
        theta = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
        k = np.searchsorted(start, theta, side="right") - 1   # -1 wraps to the last segment
        cell = order[k]
        a, b = self.vertices[self.cells[cell, 0]], self.vertices[self.cells[cell, 1]]
        # ray s·x meets a + τ(b − a): τ = (a × x)/(x × (b − a))
        cross = lambda u, v: u[:, 0] * v[:, 1] - u[:, 1] * v[:, 0]
        tau = np.clip(cross(a, x) / cross(x, b - a), 0.0, 1.0)
        return cell, np.stack([1 - tau, tau], axis=-1)

    def _locate_sphere(self, x, k=8):
        if self._locator is None:
            c = self.vertices[self.cells].mean(axis=1)
            self._locator = cKDTree(c / np.linalg.norm(c, axis=1, keepdims=True))
        _, cand = self._locator.query(x, k=min(k, len(self.cells)))
        p = self.vertices[self.cells[cand]]                  # (n, k, 3, 3)
        a, e1, e2 = p[..., 0, :], p[..., 1, :] - p[..., 0, :], p[..., 2, :] - p[..., 0, :]
        # solve a + u e1 + v e2 = s x by Cramer's rule
        xx = np.broadcast_to(x[:, None, :], a.shape)
        det = np.einsum("nkd,nkd->nk", np.cross(e1, e2), -xx)
        det = np.where(det == 0, 1e-300, det)
        ra = -a
        u = np.einsum("nkd,nkd->nk", np.cross(ra, e2), -xx) / det
        v = np.einsum("nkd,nkd->nk", np.cross(e1, ra), -xx) / det
        bad = np.minimum(np.minimum(u, v), 1 - u - v)        # >= 0 inside the triangle
        j = np.argmax(bad, axis=1)
        idx = np.arange(len(x))
        u, v = u[idx, j], v[idx, j]
        bary = np.clip(np.stack([1 - u - v, u, v], axis=-1), 0.0, 1.0)
        bary /= bary.sum(axis=1, keepdims=True)
        return cand[idx, j], bary

    # -- the contract --------------------------------------------------------------------------------
    def evaluate(self, data, x):
        x = np.asarray(x, dtype=float)
        flat = x.reshape(-1, self.dim)
        rho = np.asarray(data, dtype=float)
        out = np.empty(flat.shape[0])
        for s in range(0, flat.shape[0], 65536):
            cell, bary = self._locate(flat[s:s + 65536])
            out[s:s + 65536] = np.einsum("nk,nk->n", rho[self.cells[cell]], bary)
        return out.reshape(x.shape[:-1])

    def mass(self, data):
        """∫ρ dσ_h = Σ_i w_i ρ_i (lumped quadrature on Γ_h)."""
        return float(self.weights @ np.asarray(data, dtype=float))

    def energy(self, beta, data):
        """E_β (3.5) = (1/2β) Σ_ij w_i ρ_i w_j ρ_j e^{β⟨x_i,x_j⟩}: the lumped quadrature, in chunks."""
        return discrete_energy(beta, self.vertices, self.weights * np.asarray(data, dtype=float))

    def measure(self, data, n=None):
        """Nodes with weights w_i·max(ρ_i, 0), normalised.

        With ``n`` (an integer >= 1) each cell is subdivided further: ``n`` Gauss–Legendre points per
        segment on S^1, or the n² points of a uniform barycentric subdivision of each triangle on S^2,
        projected radially onto the sphere, with weights |K|·ρ_h(point)/(number of points).
        """
        rho = np.asarray(data, dtype=float)
        if n is None:
            w = self.weights * np.clip(rho, 0.0, None)
            return self.vertices.copy(), w / w.sum()
        n = int(n)
        if n < 1:
            raise InvalidInput(f"`n` must be a positive number of points per cell, got {n}.")
        p = self.vertices[self.cells]
        if self.dim == 2:
            g, gw = gauss_gegenbauer(n, 3)                            # Gauss–Legendre, weights summing to 1
            tau = (g + 1) / 2
            bary = np.stack([1 - tau, tau], axis=-1)                      # (q, 2)
            meas = np.linalg.norm(p[:, 1] - p[:, 0], axis=1)
        else:
            i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
            keep = i + j <= n - 1
            up = np.stack([i[keep] + 1 / 3, j[keep] + 1 / 3], -1) / n     # upward sub-triangles
            dn = np.stack([i + 2 / 3, j + 2 / 3], -1)[i + j <= n - 2] / n  # downward ones
            uv = np.concatenate([up, dn])
            bary = np.stack([1 - uv.sum(1), uv[:, 0], uv[:, 1]], axis=-1)
            gw = np.full(len(bary), 1.0 / len(bary))
            meas = 0.5 * np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1)
        pts = np.einsum("qk,mkd->mqd", bary, p)
        vals = np.einsum("qk,mk->mq", bary, rho[self.cells])
        w = np.clip(vals, 0.0, None) * gw[None, :] * meas[:, None]
        pts = pts.reshape(-1, self.dim)
        w = w.ravel()
        return pts / np.linalg.norm(pts, axis=1, keepdims=True), w / w.sum()

    def to_grid(self, data, n=None):
        """The nodal values ρ_i as a DataArray over the vertices, with their coordinates (S^2: lat/lon
        in degrees; S^1: θ in radians): the P1 field is its values at the vertices (``n`` is unused).
        `Solution.save(grid=True)` adds the cells as a UGRID mesh (`meanfield.spaces.gridded`)."""
        import xarray as xr  # deferred: xarray is heavy


        coords = ugrid_variables(self)[1]
        da = xr.DataArray(np.asarray(data, dtype=float), dims=("vertex",), name="rho",
                          coords={k: (dims, v, a) for k, (dims, v, a) in coords.items()})
        da.attrs.update(long_name="density relative to the uniform probability measure", units="1")
        return da

    def to_dataset(self, data_all):
        rho = np.asarray(data_all, dtype=float)
        data_vars = {"rho": (("time", "vertex"), rho),
                     "vertices": (("vertex", "component"), self.vertices),
                     "cells": (("cell", "corner"), self.cells)}
        attrs = {"representation": self.name,
                 "normalisation": "rho = nodal values of a P1 density relative to sigma_h, the normalised "
                                  "area measure of the flat mesh (lumped vertex quadrature)"}
        return data_vars, {}, attrs

    @classmethod
    def from_dataset(cls, ds):
        return cls(ds["vertices"].values, ds["cells"].values), ds["rho"].values
