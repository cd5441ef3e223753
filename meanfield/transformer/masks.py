"""Causal masks and the ALiBi position bias for tokens in order (docs/causal.md).

Token j (j = 1..n, the row x0[j − 1] of the particles) sits at the position σ_j, by default j/n, and
attends to the tokens C(j) = {k : σ_k <= σ_j} (``mask="causal"``, k <= j for distinct positions) or
{k : σ_k < σ_j} (``"causal-strict"``, k < j; the first token attends to nothing and stays fixed). The
pair (j, k) carries the weight w_k e^{−λ(σ_j − σ_k)}, the user's weight w_k times the ALiBi factor of
the slope λ = ``position_bias`` (Karagodin, Polyanskiy, Rigollet, *Clustering in causal attention
masking* (2024); Duerinckx, Geshkovski, Rossi, *Kinetic theory for Transformers and the
lost-in-the-middle phenomenon* (2026)):

    (SA)   X_j = P_{x_j} Σ_{k∈C(j)} w_k e^{β⟨Qx_j, Kx_k⟩ − λ(σ_j−σ_k)} V x_k / Σ_{k∈C(j)} w_k e^{β⟨Qx_j, Kx_k⟩ − λ(σ_j−σ_k)},
    (USA)  X_j = P_{x_j} Σ_{k∈C(j)} w_k e^{−λ(σ_j−σ_k)} e^{β⟨Qx_j, Kx_k⟩} V x_k / D_j,
           D_j = Σ_{k∈C(j)} w_k e^{−λ(σ_j−σ_k)}   (the positional weights are normalised).

With no mask and λ = 0, D_j = Σ_k w_k = 1 and (USA) is the paper's (USA). A token whose C(j) carries
no weight (D_j = 0: the first token under "causal-strict") does not move.

The row factor e^{−λσ_j} cancels in both quotients, and the weight factorises into a row and a column
term: the kernel sums (`meanfield.sums.kernelsums`) take C(j) as ``ends`` (row j sums the columns
k < ends_j; positions in order make C(j) a prefix) and λ(σ_k − σ_j) as the ``bias`` of the exponent.
"""
from dataclasses import dataclass

import numpy as np

from .model import MASKS
from ..validation import check_vector
from ..errors import InvalidInput

_BLOCK_EXPONENT = 30.0        # λΔσ within one block of the prefix sums (e^{±30}: no overflow, ~1e-14 rounding)


def token_positions(n, positions=None, name="token_positions"):
    """σ_j of n tokens: j/n (j = 1..n) by default, else ``positions`` checked: shape (n,), finite, in
    (0, 1] and non-decreasing (tokens in order; equal positions attend to each other); the errors name
    the argument ``name``."""
    if positions is None:
        return np.arange(1, n + 1) / n
    s = check_vector(positions, n, name, f"an array of {n} token positions in (0, 1]", "one position per token")
    if n and (s.min() <= 0.0 or s.max() > 1.0):
        raise InvalidInput(f"`{name}` must lie in (0, 1], got values from {s.min():g} to {s.max():g}.")
    drop = np.flatnonzero(np.diff(s) < 0)
    if drop.size:
        k = int(drop[0])
        raise InvalidInput(f"`{name}` must be in order (non-decreasing: x0[j] is token j + 1), but token {k + 2} is at "
                         f"{s[k + 1]:g}, after token {k + 1} at {s[k]:g}.")
    return s


def mask_ends(positions, mask):
    """ends_j, the number of tokens in C(j): row j sums the columns k < ends_j (positions in order)."""
    if mask not in MASKS[1:]:
        raise InvalidInput(f"`mask` must be one of {MASKS[1:]} for a masked sum, got {mask!r}.")
    side = "right" if mask == "causal" else "left"
    return np.searchsorted(positions, positions, side=side).astype(np.int64)


def decayed_prefix(weights, positions, slope):
    """P_j = Σ_{k<=j} w_k e^{−λ(σ_j − σ_k)} for positions in order, in O(n): cumulative sums over blocks
    within which λΔσ <= 30 (no overflow whatever λ), each block's total carried to the next."""
    w = np.asarray(weights, dtype=float)
    s = np.asarray(positions, dtype=float)
    n = w.shape[-1]
    if slope == 0.0:
        return np.cumsum(w, axis=-1)
    out = np.empty_like(w)
    carry, start = np.zeros(w.shape[:-1]), 0
    while start < n:
        ref = s[start]
        stop = max(int(np.searchsorted(s, ref + _BLOCK_EXPONENT / slope, side="right")), start + 1)
        part = np.cumsum(w[..., start:stop] * np.exp(slope * (s[start:stop] - ref)), axis=-1) + carry[..., None]
        out[..., start:stop] = part * np.exp(-slope * (s[start:stop] - ref))
        carry = out[..., stop - 1] * (np.exp(-slope * (s[stop] - s[stop - 1])) if stop < n else 1.0)
        start = stop
    return out


@dataclass(frozen=True, eq=False)
class TokenMask:
    """A causal mask with its position bias for n tokens in order, as the kernel sums take it.

    ``ends`` (n,) int64 (row j sums the columns k < ends_j), ``bias`` (λσ, λσ) or None for λ = 0 (the
    exponent of (j, k) gains λσ_k − λσ_j), ``normaliser`` D_j = Σ_{k∈C(j)} w_k e^{−λ(σ_j−σ_k)} (n,) and
    ``log_normaliser`` log D_j (finite where D_j underflows: under "causal-strict" with λ(σ_j − σ_{j−1}) >
    745), ``silent`` the tokens with an empty C(j) of no weight (no interaction), ``includes_self``
    whether k = j is in C(j)."""

    mask: str
    slope: float
    positions: np.ndarray
    ends: np.ndarray
    bias: tuple
    normaliser: np.ndarray
    silent: np.ndarray
    includes_self: bool
    log_normaliser: np.ndarray

    @property
    def depth(self):
        """min_j max_{k∈C(j)} −λ(σ_j − σ_k) over the tokens that see any (0 under "causal"): the bias of the
        nearest visible token of the worst-placed row; below about −300 the sums take each row's own shift."""
        seen = self.ends > 0
        if self.slope == 0.0 or not seen.any():
            return 0.0
        return float(np.min(-self.slope * (self.positions[seen] - self.positions[self.ends[seen] - 1])))


def token_mask(mask, slope, weights, positions=None):
    """The `TokenMask` of ``mask`` ("causal" or "causal-strict") and the ALiBi slope λ = ``slope`` for
    tokens of weights w (n,) at ``positions`` (default j/n; checked by `token_positions`)."""
    w = np.asarray(weights, dtype=float)
    n = w.shape[-1]
    s = token_positions(n, positions)
    ends = mask_ends(s, mask)
    prefix = decayed_prefix(w, s, slope)
    seen = ends > 0
    log_D = np.full(n, -np.inf)
    last = ends[seen] - 1
    with np.errstate(divide="ignore"):                  # a prefix of no weight: log 0 = −inf, silent
        log_D[seen] = np.log(prefix[last]) - slope * (s[seen] - s[last])
    with np.errstate(under="ignore"):                   # D_j below the smallest double: log D_j is kept
        D = np.exp(log_D)
    bias = None if slope == 0.0 else (slope * s, slope * s)
    return TokenMask(mask, float(slope), s, ends, bias, D, ~np.isfinite(log_D), mask == "causal", log_D)


def model_mask(model, weights, token_positions=None):
    """The `TokenMask` of each head of a masked model (a tuple: head h has its own ALiBi slope
    ``model.position_biases[h]``; heads with the same slope share one mask), or None for an unmasked model
    (a ValueError naming `token_positions` if they are given for one)."""
    if not model.is_causal:
        if token_positions is not None:
            raise InvalidInput("`token_positions` apply to a masked model: pass mask='causal' or 'causal-strict' to "
                             "the Model.")
        return None
    made = {}
    for slope in model.position_biases:
        if slope not in made:
            made[slope] = token_mask(model.mask, slope, weights, token_positions)
    return tuple(made[slope] for slope in model.position_biases)


def dense_mask(n, mask, slope=0.0, positions=None):
    """The (n, n) matrix of e^{−λ(σ_j − σ_k)} on C(j) and 0 elsewhere (np.tril of the ALiBi factors): the
    masked weights written out, for references and small examples."""
    s = token_positions(n, positions)
    keep = np.arange(n)[None, :] < mask_ends(s, mask)[:, None]
    return np.where(keep, np.exp(-slope * np.clip(s[:, None] - s[None, :], 0.0, None)), 0.0)
