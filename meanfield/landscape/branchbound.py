"""Completeness on S^1 by interval branch-and-bound: every critical point of E_β, proved (docs/landscape.md,
docs/mathematics.md §17.3).

With θ_1 = 0 fixed (the rotation removed), the critical points are the zeros of F(θ_2..θ_n) on the torus
T^{n−1}, taken as the box [c, c + 2π]^{n−1} with an offset c (so that the configurations where tokens
coincide with the first or sit opposite to it lie inside boxes, not on their faces). Each box X is

* discarded when some component of the gradient's enclosure F(X) excludes 0, or when the Krawczyk
  operator K(X) misses X (no zero) — `excluded`, on all the boxes of a level at once, in floating point
  padded outward (rigorous when numpy's sin, cos and exp are within 64(1 + |β|)/4 ulps of the truth);
* kept as holding exactly one zero when mpmath's interval K(X) lies inside X
  (`meanfield.landscape.certify.krawczyk_box`, tried where Newton from the centre lands inside X), the
  zero's Morse index proved on a box of radius <= 1e-8 about it (`certify.certify_point`);
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

from .certify import certify_point, krawczyk_box
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


def _iv_box(lo, hi):
    """The box θ_1 = 0, θ_k in [lo, hi] as mpmath intervals."""
    return [iv.mpf(0)] + [iv.mpf([float(a), float(b)]) for a, b in zip(lo, hi)]


def _split(lo, hi):
    """Every box cut in two along its widest side, at the fraction SPLIT."""
    k = np.argmax(hi - lo, axis=1)
    rows = np.arange(lo.shape[0])
    cut = lo[rows, k] + SPLIT * (hi[rows, k] - lo[rows, k])
    lo2, hi1 = lo.copy(), hi.copy()
    hi1[rows, k] = cut
    lo2[rows, k] = cut
    return np.concatenate([lo, lo2]), np.concatenate([hi1, hi])


def _newton_inside(energy, lo, hi):
    """Whether Newton from the box's centre converges to a critical point inside the box (only such boxes
    are worth a Krawczyk test; the others are split)."""
    theta = np.concatenate([[0.0], 0.5 * (lo + hi)])
    x, ok = newton(energy, np.stack([np.cos(theta), np.sin(theta)], 1), maxiter=20)
    if not ok:
        return False
    t = np.arctan2(x[:, 1], x[:, 0])
    t = t[1:] - t[0]
    t = lo + np.mod(t - lo, 2 * np.pi)                 # the representative at or above lo
    return bool(np.all(t <= hi))


# -------------------------------------------------------------------------------------------------
# exclusion, vectorised over boxes
# -------------------------------------------------------------------------------------------------
EPS = np.finfo(float).eps
TINY = 1e-300


def _critical_cosines(beta, kind):
    """cos u at the interior critical points of g(u) = −sin u e^{β cos u} ("g") or of
    h(u) = (cos u − β sin²u) e^{β cos u} ("h"), besides u = 0, π for h."""
    if beta == 0.0:
        return [0.0] if kind == "g" else []
    if kind == "g":                      # g' = (β sin²u − cos u) e^{β cos u}: βc² + c − β = 0
        roots = [(-1 + np.sqrt(1 + 4 * beta * beta)) / (2 * beta), (-1 - np.sqrt(1 + 4 * beta * beta)) / (2 * beta)]
    else:                                # h' = −sin u e^{β cos u}(β²c² + 3βc + 1 − β²)
        d = np.sqrt(5 + 4 * beta * beta)
        roots = [(-3 + d) / (2 * beta), (-3 - d) / (2 * beta)]
    return [c for c in roots if -1.0 < c < 1.0]


def _range(f, beta, kind, a, b):
    """Enclosures [low, high] of f over the intervals [a, b] (arrays): f at both ends and at every
    critical point inside (widened by 1e-9 so that one at an end is never missed), then widened by
    64(1 + |β|) ulps of the largest value to cover the rounding of numpy's sin, cos and exp (each within
    a few ulps) and of the arithmetic."""
    crit = [np.arccos(c) for c in _critical_cosines(beta, kind)]
    crit = crit + [-u for u in crit] + ([0.0, np.pi] if kind == "h" else [])
    fa, fb = f(a), f(b)
    low, high = np.minimum(fa, fb), np.maximum(fa, fb)
    for u in crit:
        k = np.ceil((a - 1e-9 - u) / (2 * np.pi))
        inside = u + 2 * np.pi * k <= b + 1e-9
        fu = f(np.array(u))
        low = np.where(inside, np.minimum(low, fu), low)
        high = np.where(inside, np.maximum(high, fu), high)
    pad = 64 * (1 + abs(beta)) * EPS * np.maximum(np.abs(low), np.abs(high)) + TINY
    return low - pad, high + pad


def excluded(energy, lo, hi):
    """A mask of the boxes (rows of ``lo``, ``hi``: θ_2..θ_n, θ_1 = 0) where some gradient entry provably
    has no zero: either its enclosure Σ_j c_ij g(θ_i − θ_j), each pair term's exact range over the box
    (`_range`), excludes 0, or the mean-value form |F_i(centre)| > Σ_k sup|J_ik| r_k does.

    Floating-point evaluation with outward padding: rigorous when numpy's sin, cos and exp are within
    64(1 + |β|)/4 ulps of the truth (they are within a few)."""
    beta, C, n = energy.beta, energy.C, energy.n
    g = lambda u: -np.sin(u) * np.exp(beta * np.cos(u))
    h = lambda u: (np.cos(u) - beta * np.sin(u) ** 2) * np.exp(beta * np.cos(u))
    B = lo.shape[0]
    L = np.concatenate([np.zeros((B, 1)), lo], axis=1)
    H = np.concatenate([np.zeros((B, 1)), hi], axis=1)
    mid = 0.5 * (L + H)
    rad = 0.5 * (H - L) * (1 + 4 * EPS)
    Flo, Fhi, Fmid = np.zeros((B, n)), np.zeros((B, n)), np.zeros((B, n))
    Fabs = np.zeros((B, n))
    Jlo, Jhi = np.zeros((B, n, n)), np.zeros((B, n, n))
    gmax = float(_range(g, beta, "g", np.array(0.0), np.array(2 * np.pi))[1])
    hfull = _range(h, beta, "h", np.array(0.0), np.array(2 * np.pi))
    for i in range(n):
        for j in range(i + 1, n):
            if C[i, j] == 0.0:
                continue
            a = np.nextafter(L[:, i] - H[:, j], -np.inf)
            b = np.nextafter(H[:, i] - L[:, j], np.inf)
            wide = b - a >= 2 * np.pi
            glo, ghi = _range(g, beta, "g", a, b)
            glo, ghi = np.where(wide, -gmax, glo), np.where(wide, gmax, ghi)
            hlo, hhi = _range(h, beta, "h", a, b)
            hlo, hhi = C[i, j] * np.where(wide, hfull[0], hlo), C[i, j] * np.where(wide, hfull[1], hhi)
            Flo[:, i] += C[i, j] * glo
            Fhi[:, i] += C[i, j] * ghi
            Flo[:, j] -= C[i, j] * ghi
            Fhi[:, j] -= C[i, j] * glo
            gm = C[i, j] * g(mid[:, i] - mid[:, j])
            Fmid[:, i] += gm
            Fmid[:, j] -= gm
            Fabs[:, i] += np.abs(gm)
            Fabs[:, j] += np.abs(gm)
            Jlo[:, i, j] = Jlo[:, j, i] = hlo                  # H_ij = c_ij h(θ_i − θ_j), H_ii = −Σ_j H_ij
            Jhi[:, i, j] = Jhi[:, j, i] = hhi
            Jlo[:, i, i] -= hhi
            Jhi[:, i, i] -= hlo
            Jlo[:, j, j] -= hhi
            Jhi[:, j, j] -= hlo
    unit = (64 * (1 + abs(beta)) + 4 * n) * EPS
    slack = unit * (np.abs(Flo) + np.abs(Fhi) + Fabs) + TINY
    naive = (Flo[:, 1:] - slack[:, 1:] > 0) | (Fhi[:, 1:] + slack[:, 1:] < 0)
    # Krawczyk's exclusion with Y ≈ J(centre)^{-1}: a zero x in the box has x − m = −Y F(m) − (Y J̃ − I)(x − m)
    # for some J̃ in J(X), so |x − m| >= |Y F(m)| − (|Y Jm − I| + |Y| Jrad) r componentwise
    Jm, Jrad = 0.5 * (Jlo + Jhi)[:, 1:, 1:], (0.5 * (Jhi - Jlo)[:, 1:, 1:]) * (1 + 4 * EPS) + unit * np.abs(
        Jlo[:, 1:, 1:]) + unit * np.abs(Jhi[:, 1:, 1:])
    lam, V = np.linalg.eigh(Jm)
    big = np.abs(lam) > 1e-12 * np.max(np.abs(lam), axis=1, keepdims=True)
    Y = np.einsum("bik,bk,bjk->bij", V, np.where(big, 1.0 / np.where(big, lam, 1.0), 0.0), V)
    absY = np.abs(Y)
    gamma = 4 * n * EPS
    z = np.einsum("bik,bk->bi", Y, Fmid[:, 1:])
    ez = np.einsum("bik,bk->bi", absY, slack[:, 1:] + gamma * np.abs(Fmid[:, 1:])) * (1 + gamma) + TINY
    YJ = np.einsum("bik,bkj->bij", Y, Jm)
    M = np.abs(YJ - np.eye(n - 1)) + np.einsum("bik,bkj->bij", absY, Jrad + gamma * np.abs(Jm)) * (1 + gamma)
    r = rad[:, 1:]
    q = np.einsum("bik,bk->bi", M, r) * (1 + gamma) + TINY
    krawczyk_none = np.abs(z) - ez - q > r
    return np.any(naive | krawczyk_none, axis=1)


def enclose(n, beta, weights=None, adjacency=None, *, min_width=1e-7, max_boxes=2_000_000):
    """Branch-and-bound over T^{n−1}: every critical point of E_β for n tokens on S^1 (module docstring).

    Parameters
    ----------
    n : int >= 2, the number of tokens.
    beta : float, of either sign.
    weights, adjacency : as in `critical_points`.
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
    m = energy.n - 1
    lo = np.full((1, m), OFFSET)
    hi = np.full((1, m), OFFSET + 2 * np.pi + 1e-9)
    while lo.shape[0]:
        out.boxes += lo.shape[0]
        if out.boxes > max_boxes:
            out.undecided.extend(_iv_box(a, b) for a, b in zip(lo, hi))
            break
        keep = ~excluded(energy, lo, hi)
        lo, hi = lo[keep], hi[keep]
        split = np.zeros(lo.shape[0], bool)
        for k in range(lo.shape[0]):
            width = float(np.max(hi[k] - lo[k]))
            if width < KRAWCZYK_WIDTH and _newton_inside(energy, lo[k], hi[k]):
                status, _ = krawczyk_box(energy, _iv_box(lo[k], hi[k]))
                if status == "unique":
                    out.zeros.append((lo[k].copy(), hi[k].copy()))
                    continue
                if status == "none":
                    continue
            if width < min_width:
                out.undecided.append(_iv_box(lo[k], hi[k]))
                continue
            split[k] = True
        lo, hi = _split(lo[split], hi[split])
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
