"""Surface meshes of the circle and the sphere, built in numpy (no external mesher).

* `polygon(n)`: the regular n-gon inscribed in S^1 (vertices on the circle, straight edges);
* `icosphere(refinement)`: the geodesic icosphere; each of the 20 faces of the icosahedron is
  split ``refinement`` times into 4, and new vertices are projected onto S^2
  (10·4^r + 2 vertices, 20·4^r triangles: r = 5 → 10 242, r = 6 → 40 962);
* `lumped_weights`: the P1 lumped-mass (vertex) weights of the piecewise-flat surface, i.e. a
  third (a half on the circle) of the area of the cells around each vertex;
* `mesh_size`: the longest edge h.

The discrete surface Γ_h is piecewise flat: its measure |Γ_h| differs from |S^{d-1}| by O(h²).
"""
import numpy as np

from meanfield.validation import check_int
from meanfield.representations.p1 import lumped_weights  # noqa: F401  (shared with the P1 representation)


def polygon(n):
    """Regular n-gon: vertices (n, 2) at angles 2πj/n and cells (n, 2) = (j, j+1 mod n)."""
    n = check_int(n, "vertices", low=8)
    theta = 2 * np.pi * np.arange(n) / n
    vertices = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    cells = np.stack([np.arange(n), (np.arange(n) + 1) % n], axis=-1).astype(np.int64)
    return vertices, cells


def _icosahedron():
    p = (1 + np.sqrt(5)) / 2
    v = np.array([[-1, p, 0], [1, p, 0], [-1, -p, 0], [1, -p, 0], [0, -1, p], [0, 1, p],
                  [0, -1, -p], [0, 1, -p], [p, 0, -1], [p, 0, 1], [-p, 0, -1], [-p, 0, 1]], dtype=float)
    f = np.array([[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4],
                  [11, 10, 2], [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8],
                  [3, 8, 9], [4, 9, 5], [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]], dtype=np.int64)
    return v / np.linalg.norm(v, axis=1, keepdims=True), f


def icosphere(refinement):
    """Geodesic icosphere: vertices (10·4^r + 2, 3) on S^2 and outward-oriented triangles (20·4^r, 3)."""
    refinement = check_int(refinement, "refinement", low=0, high=8)
    v, f = _icosahedron()
    for _ in range(refinement):
        edges = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
        edges = np.sort(edges, axis=1)
        uniq, inv = np.unique(edges, axis=0, return_inverse=True)
        mid = v[uniq[:, 0]] + v[uniq[:, 1]]
        mid /= np.linalg.norm(mid, axis=1, keepdims=True)
        m = inv.reshape(3, -1) + len(v)          # midpoint index of edges 01, 12, 20 of each face
        a, b, c = f[:, 0], f[:, 1], f[:, 2]
        f = np.concatenate([np.stack([a, m[0], m[2]], 1), np.stack([b, m[1], m[0]], 1),
                            np.stack([c, m[2], m[1]], 1), np.stack([m[0], m[1], m[2]], 1)])
        v = np.concatenate([v, mid])
    return v, f.astype(np.int64)


def mesh_size(vertices, cells):
    """The longest edge h of the mesh."""
    k = cells.shape[1]
    h = 0.0
    for i in range(k):
        for j in range(i + 1, k):
            h = max(h, float(np.max(np.linalg.norm(vertices[cells[:, i]] - vertices[cells[:, j]], axis=1))))
    return h
