"""Completeness on S^1 by interval branch-and-bound: every critical point of E_β, proved (docs/landscape.md,
docs/mathematics.md §17.3).

With θ_1 = 0 fixed (the rotation removed), the critical points are the zeros of F(θ_2..θ_n) on the torus
T^{n−1}, taken as the box [c, c + 2π]^{n−1} with an offset c (so that the configurations where tokens
coincide with the first or sit opposite to it lie inside boxes, not on their faces). Each box X is

* discarded when some component of the interval gradient F(X) excludes 0, or when the Krawczyk
  operator K(X) misses X (no zero);
* kept as holding exactly one zero when K(X) lies inside X (`meanfield.landscape.certify.krawczyk_box`),
  with that zero's Morse index proved by the interval Hessian J(X) (`certify.inertia`);
* split in two along its widest side otherwise, down to a width ``min_width``; the boxes that reach it
  undecided are reported.

When no box is left undecided, the zeros found are all the critical points modulo rotation: a
computer-assisted statement "at β = b the critical points of E_β for n tokens are exactly these, with
these Morse indices". They are then grouped modulo reflections and permutations of tokens.
"""
import time
from dataclasses import dataclass, field

import numpy as np
from mpmath import iv

from .certify import certify_point, interval_gradient, krawczyk_box
from .critical import PointSet, make_point, newton
from .energy import Energy

OFFSET = -0.713                  # the torus box starts here (not a multiple of a simple fraction of π)
SPLIT = 0.4871                   # boxes split at this fraction of their widest side
KRAWCZYK_WIDTH = 0.3             # the Krawczyk test runs on boxes narrower than this (wider ones rarely pass)


@dataclass
class Enclosure:
    """The outcome of `enclose`: ``zeros`` (one box per critical point modulo rotation, as (lo, hi)
    arrays of θ_2..θ_n), their ``indices`` (Morse index proved on the box, or None), ``classes`` (the
    `CriticalPoint` modulo all symmetries, with ``count`` the zeros in each), ``undecided`` boxes,
    ``boxes`` examined, ``seconds``."""

    n: int
    beta: float
    zeros: list = field(default_factory=list)
    indices: list = field(default_factory=list)
    classes: list = field(default_factory=list)
    counts: list = field(default_factory=list)
    undecided: list = field(default_factory=list)
    boxes: int = 0
    seconds: float = 0.0

    @property
    def complete(self):
        """True when every box was accounted for and every zero's index was proved."""
        return not self.undecided and all(i is not None for i in self.indices)


def _width(X):
    return max(float(x.b) - float(x.a) for x in X[1:])


def enclose(n, beta, weights=None, adjacency=None, *, min_width=1e-7, max_boxes=2_000_000):
    """Branch-and-bound over T^{n−1}: every critical point of E_β for n tokens on S^1 (module docstring).

    Parameters
    ----------
    n : int >= 2; beta : float; weights, adjacency : as in `critical_points`.
    min_width : boxes narrower than this that are still undecided are reported in ``undecided``.
    max_boxes : a bound on the work; the boxes left when it is reached are reported undecided.

    Returns
    -------
    `Enclosure`

    Examples
    --------
    >>> e = enclose(3, 2.0)
    >>> e.complete, len(e.zeros), [(p.clusters, p.morse_index) for p in e.classes], e.counts, e.indices.count(None)
    (True, 6, [((3,), 0), ((2, 1), 1), ((1, 1, 1), 2)], [1, 3, 2], 0)
    """
    start = time.perf_counter()
    energy = Energy(beta, n, 2, weights, adjacency)
    out = Enclosure(n=energy.n, beta=energy.beta)
    first = [iv.mpf(0)] + [iv.mpf([OFFSET, OFFSET + 2 * np.pi + 1e-9]) for _ in range(energy.n - 1)]
    stack = [first]
    while stack:
        X = stack.pop()
        out.boxes += 1
        if out.boxes > max_boxes:
            out.undecided.extend([X, *stack])
            break
        F = interval_gradient(energy, X)
        if any(float(f.a) > 0 or float(f.b) < 0 for f in F):
            continue
        status, _ = krawczyk_box(energy, X) if _width(X) < KRAWCZYK_WIDTH else ("undecided", None)
        if status == "none":
            continue
        if status == "unique":
            out.zeros.append((np.array([float(x.a) for x in X[1:]]), np.array([float(x.b) for x in X[1:]])))
            continue
        if _width(X) < min_width:
            out.undecided.append(X)
            continue
        k = 1 + int(np.argmax([float(x.b) - float(x.a) for x in X[1:]]))
        a, b = float(X[k].a), float(X[k].b)
        cut = a + SPLIT * (b - a)
        left, right = list(X), list(X)
        left[k], right[k] = iv.mpf([a, cut]), iv.mpf([cut, b])
        stack.extend([right, left])
    _group(energy, out)
    out.seconds = time.perf_counter() - start
    return out


def _group(energy, out):
    """The zeros modulo reflections and permutations, with their Morse indices: Newton from each box's
    midpoint; when the refined zero is certified (`certify.certify_point`: a unique zero in a box of
    radius <= 1e-8 about it, with its index) and that small box lies in the zero's box, it is the box's
    unique zero and its index is proved. Grouped by `critical.PointSet`."""
    found = PointSet(energy)
    counts = {}
    for lo, hi in out.zeros:
        theta = np.concatenate([[0.0], 0.5 * (lo + hi)])
        x, _ = newton(energy, np.stack([np.cos(theta), np.sin(theta)], 1))
        point = certify_point(energy, make_point(energy, x))
        t = np.arctan2(x[:, 1], x[:, 0])
        t = np.angle(np.exp(1j * (t[1:] - t[0])))
        t = np.where(t < lo - np.pi, t + 2 * np.pi, np.where(t > hi + np.pi, t - 2 * np.pi, t))
        inside = point.certified and np.all(t - point.radius > lo) and np.all(t + point.radius < hi)
        out.indices.append(point.morse_index if inside else None)
        k = found.add(x)
        counts[k] = counts.get(k, 0) + 1
    order = sorted(range(len(found.points)), key=lambda k: -found.points[k].energy)
    out.classes = [found.points[k] for k in order]
    out.counts = [counts[k] for k in order]
