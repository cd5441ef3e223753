"""Geodesic distances on the sphere and the merging of nearby atoms (docs/mathematics.md §8)."""
import numpy as np


def geodesic_distance(x, y):
    """Angle between unit vectors, accurate near 0 and π: 2·atan2(|x − y|, |x + y|)."""
    minus, plus = x - y, x + y
    return 2.0 * np.arctan2(np.sqrt(np.einsum("...d,...d->...", minus, minus)),
                            np.sqrt(np.einsum("...d,...d->...", plus, plus)))


def tangent_frame(x):
    """Orthonormal tangent vectors at unit vectors x (k, d): (e1,) = ((−x_2, x_1),) on S^1, (e1, e2) on S^2."""
    if x.shape[1] == 2:
        return (np.stack([-x[:, 1], x[:, 0]], -1),)
    a = np.where(np.abs(x[:, :1]) < 0.9, np.array([[1.0, 0, 0]]), np.array([[0, 1.0, 0]]))
    e1 = a - np.einsum("kd,kd->k", a, x)[:, None] * x
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    return e1, np.cross(x, e1)


def merge_on_grid(x, w, spacing):
    """The atoms of (x, w) merged per cell of the cubic grid of side ``spacing`` in R^d: each cell's
    mass sits at its mass-weighted mean, projected on the sphere. Returns (points, weights, cost) with
    cost = Σ_j w_j d(x_j, the point of its cell) >= W1((x, w), merged): the merging moves no mass
    farther than the cell's diameter."""
    keys = np.floor(x / spacing).astype(np.int64)
    _, cell = np.unique(keys, axis=0, return_inverse=True)
    cell = cell.ravel()
    k = int(cell.max()) + 1
    mass = np.bincount(cell, weights=w, minlength=k)
    centre = np.stack([np.bincount(cell, weights=w * x[:, j], minlength=k) for j in range(x.shape[1])], -1)
    norm = np.linalg.norm(centre, axis=1, keepdims=True)
    first = np.empty(k, dtype=np.int64)
    first[cell[::-1]] = np.arange(len(cell))[::-1]                # a point of each cell (for massless cells)
    centre = np.where(norm > 0, centre / np.where(norm > 0, norm, 1.0), x[first])
    cost = float(w @ geodesic_distance(x, centre[cell]))
    keep = mass > 0
    return centre[keep], mass[keep], cost


__all__ = ["geodesic_distance", "merge_on_grid", "tangent_frame"]
