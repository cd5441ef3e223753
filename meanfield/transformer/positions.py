"""The token position σ ∈ (0, 1] of the layered continuity equation of causal attention (docs/causal.md).

Under a causal mask with an ALiBi position bias λ, the density ρ(t, σ, ·) at position σ moves in the
field of the positions before it, weighted by (Duerinckx, Geshkovski, Rossi, *Kinetic theory for
Transformers and the lost-in-the-middle phenomenon*, arXiv 2605.09213)

    k_λ(σ, r) = λ e^{−λ(σ−r)} / (1 − e^{−λσ})  for 0 < r < σ   (1/σ at λ = 0),   ∫_0^σ k_λ(σ, r) dr = 1.

`PositionRule` discretises σ: composite Gauss–Legendre panels of `PANEL_NODES` nodes, graded
geometrically towards σ = 0, and evaluates the prefix means

    ρ̄(σ) = ∫_0^σ k_λ(σ, r) ρ(r) dr

at the nodes by a recursion in σ, O(M) per coefficient: with E(σ) = ∫_0^σ e^{−λ(σ−r)} ρ(r) dr,
E(b) = e^{−λ(b−a)} E(a) + ∫_a^b e^{−λ(b−r)} ρ(r) dr across a panel [a, b], where ρ is the degree
q − 1 interpolant through the panel's nodes (the panel integrals are precomputed weights), and
ρ̄ = E·λ/(1 − e^{−λσ}).

Why graded: k_λ(σ, ·) averages ρ over a window of length about min(σ, 1/λ), which shrinks to 0 with σ;
halving the panels towards σ = 0 keeps a whole panel inside every window down to σ ≈ 2^{−G}/P, so the
relative error of ρ̄(σ) does not grow where the weight 1/σ is largest (the first tokens, which attend to
few predecessors). Away from 0 the panels have equal widths, so that the end σ = 1 — where the
lost-in-the-middle response is read — is resolved as well as the middle.
"""
import functools
import inspect

import numpy as np
from scipy import special

from ..validation import check_int, check_real
from ..errors import InvalidInput

PANEL_NODES = 8       # q: Gauss–Legendre nodes per panel (interpolation of degree 7 in σ)


def graded_breaks(panels):
    """Panel ends 0 = b_0 < ... < b_P = 1: P − G equal panels, the first one halved G = max(0, ⌊log2 P⌋ − 1)
    times towards 0 (so the smallest panel is 2^{−G}/(P − G))."""
    P = check_int(panels, "panels", low=1)
    G = max(0, int(np.floor(np.log2(P))) - 1)
    h = 1.0 / (P - G)
    inner = h * 2.0 ** -np.arange(G, 0, -1)
    return np.concatenate([[0.0], inner, h * np.arange(1, P - G + 1)])


def position_kernel(lam, sigma, r):
    """k_λ(σ, r) = λe^{−λ(σ−r)}/(1 − e^{−λσ}) for r < σ (1/σ at λ = 0), 0 for r > σ."""
    sigma, r = np.broadcast_arrays(np.asarray(sigma, dtype=float), np.asarray(r, dtype=float))
    norm = _inverse_window(lam, sigma)
    with np.errstate(over="ignore"):
        out = norm * np.exp(-lam * (sigma - r))
    return np.where(r <= sigma, out, 0.0)


def _inverse_window(lam, sigma):
    """1/∫_0^σ e^{−λ(σ−r)} dr = λ/(1 − e^{−λσ}) (1/σ at λ = 0)."""
    sigma = np.asarray(sigma, dtype=float)
    if lam == 0.0:
        return 1.0 / sigma
    return lam / -np.expm1(-lam * sigma)


MOMENT_SWITCH = 12.0     # m_k(x) by quadrature up to here, by the closed form beyond (both within 1e-14)
_MOMENT_GAUSS = 24       # Gauss–Legendre points of that quadrature: its truncation is below 1e-20 for x <= 12


def exponential_moments(x, q):
    """m_k(x) = ∫_0^1 e^{−xu} P_k(2u − 1) du for k < q (P_k the Legendre polynomials), x >= 0 an array.

    m_k(x) = (−1)^k e^{−x/2} i_k(x/2), i_k the modified spherical Bessel function, whose finite form gives

        m_k(x) = (1/x) [(−1)^k Σ_{j≤k} (−1)^j a_kj x^{−j} − e^{−x} Σ_{j≤k} a_kj x^{−j}],   a_kj = (k + j)!/(j!(k − j)!),

    used for x > `MOMENT_SWITCH` (no cancellation there; m_k ≈ (−1)^k/x, finite for any finite x);
    below it (where the finite form cancels) a Gauss–Legendre rule of 24 points, exact to round-off.

    Returns an array of shape x.shape + (q,).

    Examples
    --------
    >>> m = exponential_moments(np.array([0.0, 1e300]), 3)
    >>> bool(np.allclose(m[0], [1, 0, 0])), bool(np.allclose(m[1] * 1e300, [1, -1, 1]))
    (True, True)
    """
    x = np.asarray(x, dtype=float)
    k = np.arange(q)
    t, tw = np.polynomial.legendre.leggauss(_MOMENT_GAUSS)
    small = np.minimum(x, MOMENT_SWITCH)[..., None]
    out = 0.5 * np.einsum("...g,gk->...k", tw * np.exp(-small * 0.5 * (t + 1)),
                          np.polynomial.legendre.legvander(t, q - 1))
    large = x > MOMENT_SWITCH
    if np.any(large):
        j = np.arange(q)
        a = np.where(j <= k[:, None], special.factorial(k[:, None] + j) / (special.factorial(j)
                     * special.factorial(np.maximum(k[:, None] - j, 0))), 0.0)
        xl = x[large][:, None]
        with np.errstate(under="ignore"):
            power = xl ** -j.astype(float)                     # x^{−j}: an underflow to 0 is exact here
            sums = (power * (-1.0) ** j) @ a.T, power @ a.T
            out[large] = ((-1.0) ** k * sums[0] - np.exp(-xl) * sums[1]) / xl
    return out


def _lagrange(nodes, x):
    """Values ℓ_j(x) (len(x), q) of the Lagrange basis through ``nodes`` (barycentric form)."""
    nodes = np.asarray(nodes, dtype=float)
    x = np.atleast_1d(np.asarray(x, dtype=float))
    diff = nodes[:, None] - nodes[None, :]
    np.fill_diagonal(diff, 1.0)
    bary = 1.0 / diff.prod(axis=1)
    d = x[:, None] - nodes[None, :]
    exact = d == 0
    d[exact] = 1.0
    terms = bary / d
    out = terms / terms.sum(axis=1, keepdims=True)
    hit = exact.any(axis=1)
    out[hit] = exact[hit].astype(float)
    return out


def takes_position(rho0):
    """Whether the initial-data callable takes (x, s) rather than x alone (two required positional
    arguments, or *args)."""
    try:
        params = inspect.signature(rho0).parameters.values()
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in params if p.kind in kinds and p.default is inspect.Parameter.empty]
    return len(required) >= 2 or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


class PositionRule:
    """Composite Gauss–Legendre rule on σ ∈ (0, 1] with the causal prefix means (module docstring).

    Parameters
    ----------
    positions : M, a multiple of `PANEL_NODES` (8) and >= 8: M/8 panels (`graded_breaks`).
    position_bias : λ >= 0, the ALiBi slope of the model.
    breaks : the panel ends (M/8 + 1 increasing numbers from 0 to 1), instead of `graded_breaks`
        (`refined` halves every panel, so that a refined rule's panels lie inside the coarse ones).

    Attributes
    ----------
    nodes : (M,) array
        The nodes s_i.
    weights : (M,) array
        w_i, positive, summing to 1; exact for polynomials of degree 15 on each panel.
    breaks : (P + 1,) array
        The panel ends.
    panels : int
        P.
    """

    def __init__(self, positions, position_bias=0.0, breaks=None):
        q = PANEL_NODES
        M = check_int(positions, "positions", low=q)
        if M % q:
            raise InvalidInput(f"`positions` must be a multiple of {q} (panels of {q} Gauss–Legendre nodes), got {M}.")
        self.lam = check_real(position_bias, "position_bias", low=0.0)
        self.size, self.panels = M, M // q
        self.breaks = graded_breaks(self.panels) if breaks is None else np.asarray(breaks, dtype=float)
        b = self.breaks
        if b.shape != (self.panels + 1,) or b[0] != 0 or b[-1] != 1 or not np.all(np.diff(b) > 0):
            raise InvalidInput(f"`breaks` must be {self.panels + 1} increasing panel ends from 0 to 1, got {b!r}.")
        x, w = np.polynomial.legendre.leggauss(q)
        a, b = self.breaks[:-1, None], self.breaks[1:, None]
        self.nodes = (0.5 * (a + b) + 0.5 * (b - a) * x).ravel()
        self.weights = (0.5 * (b - a) * w).ravel()
        self._reference = x
        self._prefix_weights()

    def _prefix_weights(self):
        """Per panel p = [a, b]: ``_inner`` (P, q, q) ∫_a^{s_i} e^{−λ(s_i−r)} ℓ_j(r) dr, ``_across`` (P, q)
        ∫_a^b e^{−λ(b−r)} ℓ_j(r) dr, the decays e^{−λ(s_i − a)} and e^{−λ(b − a)}, and 1/window at the nodes.

        Exact for every slope λ (`exponential_moments`): with u = (end − r)/h, h = end − a, the integral is
        h Σ_k c_k m_k(λh), c_k the Legendre coefficients of u ↦ ℓ_j(end − hu) on [0, 1] (degree q − 1, so
        q Gauss points give them exactly). Decays below the smallest double are 0 (their exact value to
        round-off next to the own panel's integral, which is about 1/λ)."""
        q, lam = PANEL_NODES, self.lam
        t, tw = np.polynomial.legendre.leggauss(q)
        u = 0.5 * (t + 1)
        # c_k = (2k + 1)/2 Σ_g tw_g P_k(t_g) f(u_g): exact for f of degree < q
        transform = (np.polynomial.legendre.legvander(t, q - 1) * tw[:, None]).T * (np.arange(q) + 0.5)[:, None]
        P = self.panels
        nodes = self.nodes.reshape(P, q)
        self._inner = np.empty((P, q, q))
        self._across = np.empty((P, q))
        for p in range(P):
            a = self.breaks[p]
            ends = np.append(nodes[p], self.breaks[p + 1])
            h = ends - a
            ell = _lagrange(nodes[p], (ends[:, None] - h[:, None] * u).ravel()).reshape(q + 1, q, q)
            coef = np.einsum("kg,egj->ekj", transform, ell)
            integral = h[:, None] * np.einsum("ek,ekj->ej", exponential_moments(lam * h, q), coef)
            self._inner[p], self._across[p] = integral[:q], integral[q]
        with np.errstate(under="ignore"):
            self._decay_in = np.exp(-lam * (nodes - self.breaks[:-1, None]))
            self._decay_across = np.exp(-lam * np.diff(self.breaks))
        self._window = _inverse_window(lam, self.nodes)

    def prefix_mean(self, f):
        """ρ̄(s_i) = ∫_0^{s_i} k_λ(s_i, r) f(r) dr for node values f (M, ...) (axis 0 the position),
        by the recursion across panels of the module docstring: O(M·q) per trailing entry."""
        f = np.asarray(f)
        P, q = self.panels, PANEL_NODES
        fp = f.reshape((P, q) + f.shape[1:])
        across = np.einsum("pj,pj...->p...", self._across, fp)
        start = np.empty_like(across)
        running = np.zeros_like(across[0])
        for p in range(P):                       # E(b_p) = e^{−λ(b_p − a_p)} E(a_p) + panel integral
            start[p] = running
            running = self._decay_across[p] * running + across[p]
        inner = np.einsum("pij,pj...->pi...", self._inner, fp)
        decay = self._decay_in.reshape((P, q) + (1,) * (f.ndim - 1))
        out = (decay * start[:, None] + inner).reshape(f.shape)
        return out * self._window.reshape((-1,) + (1,) * (f.ndim - 1))

    @functools.cached_property
    def prefix_matrix(self):
        """W (M, M), ρ̄(s_i) = Σ_m W_im f(s_m): the weights of `prefix_mean` as a dense lower block-triangular
        matrix (made once per rule; read-only)."""
        W = self.prefix_mean(np.eye(self.size))
        W.setflags(write=False)
        return W

    def prefix_parts(self):
        """The weights of `prefix_mean` as ρ̄(s_i) = window_i [Σ_{p < p_i} e^{−λ(s_i − b_p)} Σ_j across_pj f(s_pj)
        + Σ_j inner_{p_i, i, j} f(s_{p_i j})], with b_p the end of panel p and p_i the panel of node i: the
        earlier panels factor into a row and a column term (an ALiBi bias), the own panel is a q × q block.
        Returns (window (M,), across (P, q), inner (P, q, q))."""
        return self._window, self._across, self._inner

    def refined(self):
        """The rule with every panel halved (2M positions, the same grading)."""
        mid = 0.5 * (self.breaks[:-1] + self.breaks[1:])
        return PositionRule(2 * self.size, self.lam, np.sort(np.concatenate([self.breaks, mid])))

    def check_position(self, position, name="position"):
        """``position`` as a float in (0, 1] (ValueError naming it otherwise)."""
        s = check_real(position, name, low=0.0, low_open=True, high=1.0)
        return s

    def interpolation(self, position):
        """(indices (q,), weights (q,)): f(σ) ≈ Σ weights·f[indices], the degree q − 1 interpolant of the
        panel holding σ."""
        s = self.check_position(position)
        p = int(np.clip(np.searchsorted(self.breaks, s, side="left") - 1, 0, self.panels - 1))
        q = PANEL_NODES
        idx = np.arange(p * q, (p + 1) * q)
        return idx, _lagrange(self.nodes[idx], [s])[0]

    def interpolate(self, f, position):
        """f(σ) at ``position`` from node values f (M, ...) (axis 0 the position)."""
        idx, w = self.interpolation(position)
        return np.tensordot(w, np.asarray(f)[idx], axes=(0, 0))

    def resample(self, f, finer):
        """Node values f (M, ...) interpolated onto the nodes of another rule ``finer``."""
        f = np.asarray(f)
        out = np.empty((finer.size,) + f.shape[1:], dtype=np.result_type(f, float))
        for i, s in enumerate(finer.nodes):
            out[i] = self.interpolate(f, s)
        return out

    def panel_tail(self, f):
        """The relative size of the top two Legendre degrees (q − 2, q − 1) of f over each panel:
        sqrt(Σ top² / Σ all²) over every panel and trailing entry (the resolution in σ)."""
        f = np.asarray(f)
        P, q = self.panels, PANEL_NODES
        vander = np.polynomial.legendre.legvander(self._reference, q - 1)
        coef = np.linalg.solve(vander, f.reshape(P, q, -1))
        power = np.abs(coef) ** 2
        total = power.sum()
        return float(np.sqrt(power[:, q - 2:].sum() / total)) if total > 0 else 0.0

    def __repr__(self):
        return f"PositionRule(positions={self.size}, panels={self.panels}, position_bias={self.lam:g})"


__all__ = ["PANEL_NODES", "PositionRule", "exponential_moments", "graded_breaks", "position_kernel", "takes_position"]
