"""`Hardmax`: the singular limit β → ∞ of self-attention, integrated exactly from event to event.

As β → ∞ the softmax weights of (9.4) concentrate on the argmax set, and the tokens follow (9.5)–(9.6)
of Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on Transformers*, §9.3
(docs/attention.md, section "Hardmax"):

    R^d:        ż_i = Σ_{j ∈ C_i} λ_ij V(z_j − z_i),        C_i = argmax_j ⟨Q z_i, K z_j⟩,
    S^{d−1}:    ż_i = P_{z_i} Σ_{j ∈ C_i} λ_ij V z_j,        P_z y = y − ⟨z, y⟩z,

with λ_i the weights w_j / Σ_{C_i} w (uniform for equal token weights) when the argmax is a single
index or a tie that the motion keeps, and otherwise the Filippov convex combination that the limit
β → ∞ of softmax selects (`select_weights`). Between two events every C_i and λ_i is constant:

* in R^d the motion is linear, ż = ((Λ − I) ⊗ V) z with Λ the row-stochastic matrix of the λ_ij, and
  z(t) = exp(t (Λ − I) ⊗ V) z(t_0) exactly (`LinearFlow`: one matrix exponential per piece, on the
  tokens that move);
* on the sphere, a token whose targets do not move follows a great circle towards y = Σ λ_ij V z_j,
  tan(φ/2) = tan(φ_0/2) e^{−|y|t} for the angle φ to y (exact, `SphereFlow`); when a target moves too
  the projected field is not linear and the piece is integrated by DOP853 at rtol 1e-13 (not exact:
  its error is that of the integrator, reported in ``sol.stats["inexact_pieces"]``);
* a sliding mode whose weights must change to keep its tie (a target moves) follows the Filippov field
  with the weights re-solved at every state (`sliding_field`), by DOP853 too (an inexact piece).

Events are the times at which an argmax set changes: the first zero of a margin
min_{j ∈ C_i} s_ij − max_{k ∉ C_i} s_ik (s_ij = ⟨Q z_i, K z_j⟩), found on a scan with Hermite dip
detection and refined by Brent's method to 1e-14 in time (`next_event`).
"""
from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import solve_ivp
from scipy.linalg import expm
from scipy.sparse.linalg import expm_multiply
from scipy.optimize import brentq

from meanfield.errors import InvalidInput, SolverError, UnsupportedModel
from meanfield.representations.particles import ParticleCloud
from meanfield.validation import NORMALIZE_POINTS, NORMALIZE_WEIGHTS, check_points, check_weights

from .base import Run, Solver

TIE_TOL = 1e-11          # scores within TIE_TOL·(1 + max|s|) of the maximum are tied
SLIDE_TOL = 1e-9         # a tie whose spread exceeds SLIDE_TOL·(1 + max|s|) has broken: an event
EVENT_XTOL = 1e-14       # Brent's tolerance on the event time
EVENT_EPS = 1e-13        # a margin below −EVENT_EPS·(1 + max|s|) has crossed (one at zero is a tie that stays)
DROP = 40.0              # a layer log-weight DROP below the largest: the weight (< 4e-18) leaves the tie
SCAN = 0.05              # scan step, in units of 1/rate (the largest speed of the scores)
DENSE_EXPM = 128         # pieces of up to this size take the dense exponential, larger ones expm_multiply
MAX_ZERO_PIECES = 50     # consecutive pieces of zero length before the run reports a Zeno point


def scores(z, M):
    """s_ij = ⟨Q z_i, K z_j⟩ = z_i M z_jᵀ with M = QᵀK, for tokens z (n, d)."""
    return z @ M @ z.T


def velocity(z, W, V, domain):
    """The field of (9.5) for the weight matrix W (n, n), row i the λ_ij (R^d: Σ_j W_ij V(z_j − z_i);
    the sphere: P_{z_i} Σ_j W_ij V z_j)."""
    y = W @ z @ V.T
    if domain == "sphere":
        return y - np.sum(z * y, axis=1, keepdims=True) * z
    return y - (W.sum(axis=1, keepdims=True) * z) @ V.T


def score_rates(z, zdot, M):
    """ṡ_ij = ⟨Q ż_i, K z_j⟩ + ⟨Q z_i, K ż_j⟩."""
    return zdot @ M @ z.T + z @ M @ zdot.T


# -- the selection rule at ties ---------------------------------------------------------------------
def _layer_weights(u, sets, logw):
    """λ_i = softmax(u_i + log w) on each tied set."""
    out = []
    for ui, Ti in zip(u, sets):
        a = ui + logw[Ti]
        a = np.exp(a - a.max())
        out.append(a / a.sum())
    return out


def _matrix(n, rows, sets, lam):
    W = rows.copy()
    for i, Ti, li in zip(*_tied(sets), lam):
        W[i] = 0.0
        W[i, Ti] = li
    return W


def _tied(sets):
    keys = list(sets)
    return keys, [sets[i] for i in keys]


def _layer_field(z, M, V, domain, rows, sets, logw, u):
    """The fast (layer) system du_ij/dτ = ṡ_ij − mean_j ṡ_ij of the tied tokens at the frozen state z."""
    idx, T = _tied(sets)
    lam = _layer_weights(u, T, logw)
    W = _matrix(len(z), rows, sets, lam)
    sd = score_rates(z, velocity(z, W, V, domain), M)
    out = []
    for i, Ti in zip(idx, T):
        r = sd[i, Ti]
        out.append(r - r.mean())
    return out, W


def _run_layer(z, M, V, domain, rows, sets, logw, u, rate, max_rounds=200):
    """Follow the layer system from u until an equilibrium (a Filippov sliding combination, refined by
    Newton's method) or until weights leave the tie: below e^{-DROP} of the largest, or below 1e-6 and
    not coming back (at the face without them their score grows no faster than the largest). Returns
    (sets, u, W)."""
    sets = {i: np.array(T) for i, T in sets.items()}
    dtau = 0.5 / rate
    for _ in range(max_rounds):
        idx, T = _tied(sets)
        if not idx:
            break
        f, W = _layer_field(z, M, V, domain, rows, sets, logw, u)
        if max(np.max(np.abs(fi)) for fi in f) <= 1e-6 * rate:
            found = _newton(z, M, V, domain, rows, sets, logw, u, rate)
            if found is not None:
                return sets, found[0], found[1]
        sizes = np.cumsum([0] + [len(t) for t in T])

        def rhs(_, flat):
            parts = [flat[sizes[k]:sizes[k + 1]] for k in range(len(T))]
            return np.concatenate(_layer_field(z, M, V, domain, rows, sets, logw, parts)[0])

        sol = solve_ivp(rhs, (0.0, dtau), np.concatenate(u), method="LSODA", rtol=1e-10, atol=1e-12)
        flat = sol.y[:, -1]
        u = [flat[sizes[k]:sizes[k + 1]] for k in range(len(T))]
        face = _layer_field(z, M, V, domain, rows, sets, logw, [ui - DROP * (ui < ui.max() - 5.0) for ui in u])[0]
        new_sets, new_u = {}, []
        for i, Ti, ui, fi in zip(idx, T, u, face):
            a = ui + logw[Ti]
            lam = np.exp(a - a.max())
            lam /= lam.sum()
            # a weight below 1e-6 leaves when, with the small weights set to zero (the face), its score still
            # grows no faster than the largest: it does not come back
            keep = (a >= a.max() - DROP) & ~((lam < 1e-6) & (fi <= fi.max() + 1e-12 * rate) & (lam < lam.max()))
            if keep.sum() > 1:
                new_sets[i], ui = Ti[keep], ui[keep]
                new_u.append(ui - ui.mean())
            else:
                rows[i] = 0.0
                rows[i, Ti[np.argmax(a)]] = 1.0
        sets, u = new_sets, new_u
        dtau = min(2.0 * dtau, 1e12 / rate)
    else:
        raise SolverError("the layer system of a tie (the β → ∞ selection, docs/attention.md) did not settle: "
                          "no Filippov combination and no face was reached.")
    return sets, u, _matrix(len(z), rows, sets, _layer_weights(u, _tied(sets)[1], logw))


def _newton(z, M, V, domain, rows, sets, logw, u, rate):
    """Newton's method for the layer equilibrium near u: (u*, W) with |f| <= 1e-13·rate, or None."""
    sizes = np.cumsum([0] + [len(t) for t in _tied(sets)[1]])
    for _ in range(12):
        J, F = _jacobian(z, M, V, domain, rows, sets, logw, u, rate)
        flat = np.concatenate(u)
        step = np.linalg.lstsq(J, F(flat), rcond=1e-10)[0]
        flat = flat - step
        u = [flat[sizes[k]:sizes[k + 1]] for k in range(len(sizes) - 1)]
        f, W = _layer_field(z, M, V, domain, rows, sets, logw, u)
        if max(np.max(np.abs(fi)) for fi in f) <= 1e-13 * rate:
            return u, W
        if np.max(np.abs(flat)) > DROP:
            return None
    return None


def _jacobian(z, M, V, domain, rows, sets, logw, u, rate):
    """The Jacobian of the centred layer field at u (central differences), on the centred coordinates."""
    flat = np.concatenate(u)
    sizes = np.cumsum([0] + [len(t) for t in _tied(sets)[1]])

    def F(x):
        parts = [x[sizes[k]:sizes[k + 1]] for k in range(len(sizes) - 1)]
        return np.concatenate(_layer_field(z, M, V, domain, rows, sets, logw, parts)[0])

    h = 1e-6
    J = np.column_stack([(F(flat + h * e) - F(flat - h * e)) / (2 * h) for e in np.eye(flat.size)])
    return J, F


def select_weights(z, weights, M, V, domain="euclidean", forced=()):
    """The weights λ of (9.5) at the state z: the argmax sets, and at ties the β → ∞ selection.

    At a tie, softmax at large β sees the scores through u = β(s_ij − s_ik): in the fast time τ = βt
    the state is frozen and u obeys the layer system du_ij/dτ = ṡ_ij(λ(u)), λ_i = softmax(u_i + log w).
    An exactly tied start is u = 0 for every β, so the limit follows the layer system from u = 0
    (docs/attention.md, "The selection rule"): to an equilibrium, where every ṡ_ij of a tied set is
    equal, that is the Filippov combination that keeps the tie (a sliding mode); or towards a face of
    the simplex, where some weights vanish and the tie breaks in favour of the others.

    Parameters
    ----------
    z : (n, d) array
        The tokens.
    weights : (n,) array
        The token weights w (summing to 1).
    M, V : (d, d) arrays
        QᵀK and V.
    domain : "euclidean" or "sphere"
    forced : iterable of (i, j)
        Pairs counted as tied whatever their scores (the pair of an event just found).

    Returns
    -------
    W : (n, n) array
        Row i holds λ_ij on the selected set, zero elsewhere.
    ties : list of dict
        One entry for each group of tied tokens whose layer systems are coupled: ``tokens``, ``sets`` (after the selection), ``weights`` (the
        selected λ on each set), ``stable`` (the layer equilibrium is stable), ``options`` (when it is
        not: for each other limit, reached from the equilibrium along an unstable direction, the rows
        {token: W[token]} of its weight matrix; they are the limits β → ∞ of data moved off the tie,
        docs/attention.md).

    Examples
    --------
    Example 9.3 of the paper: z_3 = (a, a) is tied between z_1 and z_2; the limit gives it the weights
    (1/2, 1/2), an unstable equilibrium whose two other options are the faces (1, 0) and (0, 1):

    >>> import numpy as np
    >>> z = np.array([[1.0, 0.0], [0.0, 1.0], [0.25, 0.25]])
    >>> W, ties = select_weights(z, np.full(3, 1 / 3), np.eye(2), np.eye(2))
    >>> W[2].tolist(), ties[0]["stable"], [option[2] for option in ties[0]["options"]]
    ([0.5, 0.5, 0.0], False, [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    """
    n = len(z)
    S = scores(z, M)
    scale = 1.0 + np.abs(S).max()
    top = S.max(axis=1, keepdims=True)
    tied = S >= top - TIE_TOL * scale
    for i, j in forced:
        tied[i, j] = True
        tied[i, np.argmax(S[i])] = True
    rows = np.zeros((n, n))
    sets = {}
    for i in range(n):
        Ti = np.flatnonzero(tied[i])
        if Ti.size == 1:
            rows[i, Ti[0]] = 1.0
        else:
            sets[i] = Ti
    if not sets:
        return rows, []
    logw = np.log(np.maximum(weights, 1e-300))
    rate = score_speed(z, M, V)
    W, ties = rows.copy(), []
    for group in _groups(sets):
        found = _pair(z, M, V, domain, rows, group[0], sets[group[0]], weights, rate) if (
            len(group) == 1 and len(sets[group[0]]) == 2) else _layer(z, M, V, domain, rows, {i: sets[i] for i in group},
                                                                     logw, rate)
        for i in group:
            W[i] = found[0][i]
        ties += found[1]
    return W, ties


def _groups(sets):
    """The tied tokens in groups whose layer systems are coupled: i and l (both tied) are coupled when l
    is in the tied set of i or i in that of l (ṡ_ij involves ż_i and ż_j)."""
    keys = list(sets)
    parent = {i: i for i in keys}

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in keys:
        for l in sets[i]:
            if l != i and l in parent:
                parent[root(i)] = root(l)
    out = {}
    for i in keys:
        out.setdefault(root(i), []).append(i)
    return list(out.values())


def _layer(z, M, V, domain, rows, sets, logw, rate):
    """The layer system of a group of coupled tied tokens, integrated from u = 0 (`_run_layer`)."""
    u0 = [np.zeros(len(T)) for T in sets.values()]
    out_sets, u, W = _run_layer(z, M, V, domain, rows.copy(), sets, logw, u0, rate)
    record = {"tokens": sorted(int(i) for i in sets),
              "sets": {int(i): out_sets.get(i, np.flatnonzero(W[i])).tolist() for i in sets},
              "weights": {int(i): W[i, np.flatnonzero(W[i])].tolist() for i in sets}, "stable": True, "options": []}
    if out_sets:
        record.update(_options(z, M, V, domain, W, out_sets, logw, u, rate))
    return W, [record]


def _pair(z, M, V, domain, rows, i, T, weights, rate):
    """The layer system of one token tied between two indices, in closed form: with g(λ) = ṡ_ik − ṡ_ij
    linear in the weight λ of k, g = λA + (1 − λ)B (A, B at the faces), u = u_k − u_j obeys u̇ = g(λ(u)):
    A, B > 0 (< 0) drift to the face k (j); A < 0 < B is the stable sliding weight λ* = B/(B − A);
    A > 0 > B is unstable at λ*: from the start λ_0 = w_k/(w_j + w_k) the face g(λ_0) points to, or
    λ_0 itself when g(λ_0) = 0 (the two faces are then the options); A = B = 0 keeps λ_0 (neutral)."""
    j, k = T

    def face(lam):
        W = rows.copy()
        W[i, j], W[i, k] = 1.0 - lam, lam
        sd = score_rates(z, velocity(z, W, V, domain), M)
        return sd[i, k] - sd[i, j], W

    (A, Wk), (B, Wj) = face(1.0), face(0.0)
    tol = 1e-12 * rate
    A, B = (0.0 if abs(x) <= tol else x for x in (A, B))
    record = {"tokens": [int(i)], "stable": True, "options": []}
    lam0 = weights[k] / (weights[j] + weights[k])
    if A == 0 and B == 0:                # g = 0 for every λ: the weights stay where they start (neutral)
        W = face(lam0)[1]
    elif A >= 0 and B >= 0 or A <= 0 and B <= 0:      # one sign throughout (a zero face is reached slowly)
        W = Wk if A + B > 0 else Wj
    elif A < 0 < B:
        W = face(B / (B - A))[1]
    else:
        g0 = lam0 * A + (1.0 - lam0) * B
        if abs(g0) > 1e-12 * rate:
            W = Wk if g0 > 0 else Wj
        else:
            W = face(lam0)[1]
            record.update(stable=False, options=[{int(i): Wk[i].tolist()}, {int(i): Wj[i].tolist()}])
            record["options"].sort(key=lambda o: [-x for x in o[int(i)]])
    support = np.flatnonzero(W[i])
    record.update(sets={int(i): support.tolist()}, weights={int(i): W[i, support].tolist()})
    return W, [record]


def _options(z, M, V, domain, W, sets, logw, u, rate):
    """Stability of a layer equilibrium and, when it is unstable, where its unstable directions lead."""
    rows = W.copy()
    J, _ = _jacobian(z, M, V, domain, rows, sets, logw, u, rate)
    vals, vecs = np.linalg.eig(J)
    unstable = [k for k in range(len(vals)) if vals[k].real > 1e-8 * rate]
    if not unstable:
        return {"stable": True, "options": []}
    sizes = np.cumsum([0] + [len(t) for t in _tied(sets)[1]])
    options = []
    for k in unstable:
        for sign in (1.0, -1.0):
            x = np.concatenate(u) + sign * 1e-3 * np.real(vecs[:, k]) / np.abs(np.real(vecs[:, k])).max()
            start = [x[sizes[m]:sizes[m + 1]] for m in range(len(sizes) - 1)]
            _, _, Wk = _run_layer(z, M, V, domain, W.copy(), sets, logw, start, rate)
            Wk = np.where(np.abs(Wk) < 1e-15, 0.0, Wk)
            if not any(np.allclose(Wk, o, atol=1e-9) for o in options):
                options.append(Wk)
    options.sort(key=lambda o: [-x for x in o.ravel()])
    tokens = list(sets)
    return {"stable": False, "options": [{int(i): o[i].tolist() for i in tokens} for o in options]}


def _off_diagonal(W):
    """Σ_{j≠i} W_ij for each row i."""
    return W.sum(axis=1) - np.diag(W)


def _is_scalar(V):
    return bool(np.array_equal(V, V[0, 0] * np.eye(len(V))))


def score_speed(z, M, V):
    """A speed scale of the scores: |V|·|M|·max|z|² (at least 1e-12)."""
    r = np.linalg.norm(V, 2) * np.linalg.norm(M, 2) * max(float(np.max(np.sum(z * z, axis=1))), 1e-12)
    return max(r, 1e-12)


# -- the exact flows between events -----------------------------------------------------------------
class LinearFlow:
    """z(τ) = exp(τ (W − I) ⊗ V) z_0 in R^d, on the tokens that move and those they attend to (the dense
    exponential up to DENSE_EXPM unknowns, beyond it applied to z_0 by `scipy.sparse.linalg.expm_multiply`;
    both accurate to rounding). The tokens that do not move keep their coordinates exactly."""

    exact = True                     # `SphereFlow` says whether its piece is; this one always is

    def __init__(self, z0, W, V):
        self.z0, self.W, self.V = z0, W, V
        moving = _off_diagonal(W) > 0                 # ż_i = Σ_j W_ij V(z_j − z_i): the self weight does not act
        involved = np.flatnonzero(moving | (W[moving].sum(axis=0) > 0))
        self.involved, self.moving = involved, np.flatnonzero(moving)
        self.in_moving = moving[involved]
        G = W[np.ix_(involved, involved)] - np.diag(W[involved].sum(axis=1))     # zero rows for the still ones
        self.scalar = _is_scalar(V)
        self.G = G * V[0, 0] if self.scalar else np.kron(G, V)

    def state(self, tau):
        z = self.z0.copy()
        if self.involved.size and tau != 0.0:
            sub = self.z0[self.involved] if self.scalar else self.z0[self.involved].ravel()
            if len(self.G) <= DENSE_EXPM:
                new = expm(tau * self.G) @ sub
            else:                             # exp(τG) applied by Al-Mohy and Higham's method (to rounding)
                new = expm_multiply(tau * self.G, sub)
            z[self.moving] = new.reshape(len(self.involved), -1)[self.in_moving]    # the still ones stay exactly
        return z


class NumericalFlow:
    """A piece integrated by DOP853 at rtol 1e-13 (not exact: the integrator's error), in chunks that double,
    for the field ``field(z)`` (on the sphere, of z/|z|, and the state normalised)."""

    exact = False

    def __init__(self, z0, field, sphere, horizon, chunk):
        self.z0, self.field, self.sphere = z0, field, sphere
        self.horizon, self.chunk, self.dense = horizon, min(horizon, chunk), []

    def _rhs(self, _, flat):
        z = flat.reshape(self.z0.shape)
        return self.field(z / np.linalg.norm(z, axis=1, keepdims=True) if self.sphere else z).ravel()

    def state(self, tau):
        if tau == 0.0:
            return self.z0.copy()
        while not self.dense or self.dense[-1].t_max < tau:
            start = self.dense[-1].t_max if self.dense else 0.0
            y0 = self.dense[-1](start) if self.dense else self.z0.ravel()
            end = min(max(start + self.chunk, tau), self.horizon) if start + 1e-12 < self.horizon else tau
            self.dense.append(solve_ivp(self._rhs, (start, max(end, start + 1e-12)), y0, method="DOP853", rtol=1e-13,
                                        atol=1e-14, dense_output=True).sol)
            self.chunk *= 2.0
        z = next(p for p in self.dense if p.t_max >= tau)(tau).reshape(self.z0.shape)
        return z / np.linalg.norm(z, axis=1, keepdims=True) if self.sphere else z


def sliding_field(W, pairs, M, V, domain):
    """The Filippov field of sliding pairs whose weights change along the motion (equivalent control): at
    each state the weight of token i on k is λ* = B/(B − A), A, B the rates ṡ_ik − ṡ_ij at the two faces
    (`_pair`), clipped to [0, 1]; the other rows are those of W."""
    def field(z):
        Wz = W.copy()
        for i, (j, k) in pairs.items():
            rates = []
            for lam in (1.0, 0.0):
                Wz[i, j], Wz[i, k] = 1.0 - lam, lam
                sd = score_rates(z, velocity(z, Wz, V, domain), M)
                rates.append(sd[i, k] - sd[i, j])
            A, B = rates
            lam = min(max(B / (B - A), 0.0), 1.0) if B != A else W[i, k]
            Wz[i, j], Wz[i, k] = 1.0 - lam, lam
        return velocity(z, Wz, V, domain)

    return field


class SphereFlow:
    """The piece on S^{d−1}: great circles towards fixed targets (exact), else DOP853 at rtol 1e-13."""

    def __init__(self, z0, W, V, horizon, chunk):
        self.z0, self.W, self.V = z0, W, V
        y = W @ z0 @ V.T
        moves = (_off_diagonal(W) > 0) | (np.abs(velocity(z0, W, V, "sphere")).max(axis=1) > 1e-14)
        still = ~moves                     # attends to itself only and P_z V z = 0 (to rounding): never moves
        targets_fixed = all(np.all(still[np.flatnonzero(W[i])[np.flatnonzero(W[i]) != i]]) for i in np.flatnonzero(moves))
        self_term = np.any(np.diag(W)[moves] > 0) and not _is_scalar(V)
        self.exact = bool(targets_fixed and not self_term)
        self.moves = np.flatnonzero(moves)
        if self.exact:
            yd = y[self.moves]
            if _is_scalar(V):
                w_self = np.diag(W)[self.moves][:, None]
                yd = yd - w_self * V[0, 0] * z0[self.moves]        # P_z z = 0: the self term does not act
            self.speed = np.linalg.norm(yd, axis=1)
            if np.any(self.speed == 0):             # targets that cancel: no great circle, integrate
                self.exact = False
                self.speed = np.ones_like(self.speed)
            self.yhat = yd / self.speed[:, None]
            c = np.sum(z0[self.moves] * self.yhat, axis=1)
            perp = z0[self.moves] - c[:, None] * self.yhat
            s = np.linalg.norm(perp, axis=1)
            self.e = perp / np.where(s > 0, s, 1.0)[:, None]
            self.half = np.tan(0.5 * np.arctan2(s, c))
        if not self.exact:
            self.numerical = NumericalFlow(z0, lambda z: velocity(z, W, V, "sphere"), True, horizon, chunk)

    def state(self, tau):
        if tau == 0.0:
            return self.z0.copy()
        if not self.exact:
            return self.numerical.state(tau)
        z = self.z0.copy()
        phi = 2.0 * np.arctan(self.half * np.exp(-self.speed * tau))
        z[self.moves] = np.cos(phi)[:, None] * self.yhat + np.sin(phi)[:, None] * self.e
        return z


@dataclass(eq=False)
class Piece:
    """One piece of the motion: from time t0 and state z0, the weights W and their flow."""

    t0: float
    z0: np.ndarray
    W: np.ndarray
    flow: object
    clear_to: float = None       # the motion has been scanned up to here without an event
    base: np.ndarray = None      # the margins' negative parts at t0 (ties within TIE_TOL the selection dropped)


def margins(z, W, M, scale):
    """The margins that stay positive until the next event (n,) and, for tied sets, their spreads:
    min_{j∈C_i} s_ij − max_{k∉C_i} s_ik, and SLIDE_TOL·scale − (max − min)_{C_i} s_ij."""
    S = scores(z, M)
    inside = W > 0
    low = np.where(inside, S, np.inf).min(axis=1)
    high = np.where(inside, S, -np.inf).max(axis=1)
    out = np.where(inside, -np.inf, S).max(axis=1)
    m = low - out
    spread = SLIDE_TOL * scale - (high - low)
    return np.concatenate([np.where(np.isfinite(m), m, np.inf), spread])


def next_event(piece, M, t_from, target, rate, scale):
    """The first time in (t_from, target] at which a margin of ``piece`` vanishes, or None.

    A scan of step SCAN/rate, each interval checked for a sign change and, where the margins sag
    towards zero between two positive values, halved (up to 40 times); the root is refined by Brent's
    method (xtol EVENT_XTOL). A margin that starts below zero (an index of a tie, within TIE_TOL, that
    the selection dropped) is measured from its start: it has crossed when it falls further."""
    t0 = piece.t0
    if piece.base is None:
        piece.base = np.minimum(margins(piece.z0, piece.W, M, scale), 0.0)

    def g(t):
        return margins(piece.flow.state(t - t0), piece.W, M, scale) - piece.base

    h = SCAN / rate
    a, ga = t_from, g(t_from)
    while a < target:
        b = min(a + h, target)
        if target - b < 1e-3 * h:
            b = target
        gb = g(b)
        hit = _first_crossing(g, a, ga, b, gb, 0, EVENT_EPS * scale)
        if hit is not None:
            return hit
        a, ga = b, gb
    return None


def _first_crossing(g, a, ga, b, gb, depth, eps):
    """The first zero of the margins g in (a, b], or None (bisecting where a dip is suspected)."""
    neg = np.flatnonzero(gb < -eps)
    if neg.size:
        times = []
        for k in neg:
            shift = 0.0 if ga[k] > 0 else eps          # a margin that sits at zero: its crossing of −eps
            if ga[k] + shift <= 0:                      # already below at a: the event is a
                times.append(a)
                continue
            times.append(brentq(lambda t: g(t)[k] + shift, a, b, xtol=EVENT_XTOL, rtol=4 * np.finfo(float).eps))
        # an earlier crossing of another margin inside (a, t*] is found by halving
        t_star = min(times)
        if depth < 40 and t_star > a:
            mid_hit = _dip(g, a, ga, t_star, g(t_star), depth, eps)
            if mid_hit is not None and mid_hit < t_star:
                return mid_hit
        return t_star
    return _dip(g, a, ga, b, gb, depth, eps)


def _dip(g, a, ga, b, gb, depth, eps):
    """Halve (a, b) where the margins come within a quarter of their values of zero (a possible dip)."""
    if depth >= 40 or b - a < 1e-13:
        return None
    mid = 0.5 * (a + b)
    gm = g(mid)
    finite = np.isfinite(ga) & np.isfinite(gb) & np.isfinite(gm)
    lin = 0.5 * (ga + gb)
    suspicious = finite & (gm < lin) & (gm < 0.25 * np.minimum(ga, gb)) if depth < 6 else finite & (gm < -eps)
    if not np.any(suspicious) and not np.any(gm < -eps):
        return None
    hit = _first_crossing(g, a, ga, mid, gm, depth + 1, eps)
    return _first_crossing(g, mid, gm, b, gb, depth + 1, eps) if hit is None else hit


@dataclass(eq=False, slots=True)
class HardmaxRun(Run):
    """The per-run values of a `Hardmax` run."""

    domain: str = "euclidean"          # "euclidean" (R^d, (9.5)) or "sphere" (S^{d-1} with P_x)
    weights: np.ndarray = None         # (n,) token weights, summing to 1
    piece: Piece = None                # the current piece of the motion
    events: list = field(default_factory=list)    # (t, token, set before, set after) of each event
    ties: list = field(default_factory=list)      # the selections made at ties (`select_weights`), with t
    zero_pieces: int = 0               # consecutive pieces of zero length (Zeno detection)
    inexact_pieces: int = 0            # sphere pieces integrated numerically (targets that move)


class Hardmax(Solver):
    """The hardmax dynamics (9.5)–(9.6), the limit β → ∞ of self-attention, exactly, event to event.

    Parameters
    ----------
    model : `meanfield.Model` with ``attention="hardmax"``, one head (any Q, K, V), no noise, no mask;
        β does not enter (the argmax sets are those of ⟨Qz_i, Kz_j⟩ for every β > 0).
    threads : int >= 1, optional
        Accepted for the common signature; the solver runs on one thread.

    Raises
    ------
    UnsupportedModel
        Another ``attention``, several heads, noise, a mask or a model part it does not take.

    Notes
    -----
    ``solve(z0, t_eval, weights=None, domain="euclidean")``: ``z0`` tokens (n, d) (on the sphere unit
    vectors, checked; ``normalize=True`` projects them), or a (points, weights) pair, or a Solution of
    this solver (continued). ``domain="euclidean"`` is (9.5) in R^d, ``"sphere"`` its projected form on
    S^{d−1}. The one stepper, "events", has no time step: each piece between two events is the exact
    flow (`LinearFlow`, `SphereFlow`), events are found to 1e-12. ``sol.stats`` holds ``events`` (the
    number), ``event_log`` ((t, token, old set, new set) for each), ``ties`` (each selection at a tie:
    time, tokens, sets, weights, whether the limit is stable, and the other options where it is not)
    and ``inexact_pieces``. docs/attention.md, section "Hardmax", states the selection rule.

    Examples
    --------
    A token strictly inside the cell of a fixed vertex v moves on the straight line v + (z_0 − v)e^{−t}:

    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> z0 = np.array([[2.0, 0.0], [0.0, 2.0], [0.9, 0.3]])
    >>> sol = solvers.Hardmax(mf.Model(beta=1.0, dim=2, attention="hardmax")).solve(z0, [0.0, 1.0], progress=False)
    >>> np.allclose(sol.positions[-1, 2], [2.0, 0.0] + (z0[2] - [2.0, 0.0]) * np.exp(-1.0), rtol=0, atol=1e-12)
    True
    """

    steppers = ("events",)
    solve_options = {"weights": None, "domain": "euclidean"}
    positional_options = ("weights",)
    run_type = HardmaxRun
    mass_by_construction = True
    attentions = ("hardmax",)

    @classmethod
    def examples(cls):
        """Small runs (`solvers.Solver.examples`)."""
        from meanfield.transformer.model import Model

        return {"Hardmax": (lambda: cls(Model(beta=1.0, dim=2, attention="hardmax")),
                            [np.array([[0.17, 0.11], [0.62, 0.12], [-0.42, -0.17], [0.64, 0.25], [0.92, -0.26]]),
                             np.array([[1.0, 0.0], [0.0, 1.0], [0.25, 0.25]])], {})}

    def __init__(self, model, *, threads=None):
        Solver.__init__(self, model, threads)
        if len(model.heads) != 1:
            raise UnsupportedModel(f"Hardmax takes one head, got `heads` with {len(model.heads)}.")
        if model.noise:
            raise UnsupportedModel(f"Hardmax is deterministic: `noise` must be 0, got {model.noise:g}.")
        Q, K, V = model.heads[0]
        self.M = Q.T @ K
        self.V = np.asarray(V, dtype=float)

    # -- the Solver contract --------------------------------------------------------------------------
    def _configure(self, run):
        domain = run.options["domain"]
        if domain not in ("euclidean", "sphere"):
            raise InvalidInput(f"`domain` must be 'euclidean' or 'sphere', got {domain!r}.")
        run.domain = domain

    def _initial_from_data(self, run, z0, normalize, weights=None):
        d = self.model.dim
        if run.domain == "sphere":
            z = check_points(z0, "z0", dim=d, normalize=normalize, min_ndim=2, hint=NORMALIZE_POINTS)
        else:
            try:
                z = np.asarray(z0, dtype=float)
            except (TypeError, ValueError):
                raise InvalidInput(f"`z0` must be an array of shape (n, {d}).") from None
            if not np.all(np.isfinite(z)):
                raise InvalidInput("`z0` contains NaN or inf.")
        if z.ndim != 2 or z.shape[1] != d or z.shape[0] < 1:
            raise InvalidInput(f"`z0` must have shape (n, {d}) with n >= 1 (one configuration), got {z.shape}.")
        w = run.options["weights"] if weights is None else weights
        run.weights = check_weights(w, z.shape[0], normalize=normalize, hint=NORMALIZE_WEIGHTS)
        return z.copy()

    def _initial_from_measure(self, run, points, weights, normalize):
        return self._initial_from_data(run, points, normalize, weights=np.asarray(weights, dtype=float))

    def _initial_from_solution(self, run, sol):
        if sol.solver != "Hardmax":
            raise InvalidInput(f"`z0` is a Solution of {sol.solver}; Hardmax continues its own Solutions (pass "
                               "sol.positions[-1] to start from its tokens).")
        run.options["domain"] = run.domain = sol.representation.domain
        return self._initial_from_data(run, sol.positions[-1], False, weights=sol.weights)

    def _rhs(self, run, t, y):
        """The field (9.5) (Filippov weights of the current piece) at the state y."""
        W = run.piece.W if run.piece is not None else select_weights(y, run.weights, self.M, self.V, run.domain)[0]
        return velocity(y, W, self.V, run.domain)

    def _representation(self, run):
        return ParticleCloud(run.weights, self.model.dim, domain=run.domain)

    def _stats(self, run):
        return {"domain": run.domain, "events": len(run.events), "event_log": list(run.events),
                "ties": list(run.ties), "inexact_pieces": run.inexact_pieces}

    # -- the events -----------------------------------------------------------------------------------
    def _new_piece(self, run, t, z, forced=()):
        W, ties = select_weights(z, run.weights, self.M, self.V, run.domain, forced)
        for tie in ties:
            run.ties.append({"t": float(t), **tie})
        chunk = 20 * SCAN / score_speed(z, self.M, self.V)
        flow = (SphereFlow(z, W, self.V, run.t_eval[-1] - t, chunk) if run.domain == "sphere" else
                LinearFlow(z, W, self.V))
        pairs = self._drifting_pairs(z, W, ties, flow, chunk / 20)
        if pairs:
            flow = NumericalFlow(z, sliding_field(W, pairs, self.M, self.V, run.domain), run.domain == "sphere",
                                 run.t_eval[-1] - t, chunk)
        run.inexact_pieces += not flow.exact
        return Piece(float(t), z.copy(), W, flow, clear_to=float(t))

    def _drifting_pairs(self, z, W, ties, flow, h):
        """{i: (j, k)}: the stable sliding pairs (interior weights) whose tie the constant weights do not keep
        (its spread after the scan step h exceeds 1e-13 of the scores' size): their targets move."""
        pairs = {}
        for tie in ties:
            if tie["stable"] and len(tie["tokens"]) == 1:
                i = tie["tokens"][0]
                support = tie["sets"][i]
                if len(support) == 2 and min(tie["weights"][i]) > 0:
                    pairs[i] = tuple(support)
        if not pairs:
            return {}
        S = scores(flow.state(h), self.M)
        scale = 1.0 + np.abs(S).max()
        return {i: p for i, p in pairs.items() if abs(S[i, p[0]] - S[i, p[1]]) > 1e-13 * scale}

    def _advance(self, run, t, y, target):
        """The state at the first event after t, or at ``target`` (`solvers.timestepping.Events`)."""
        piece = run.piece
        if piece is None or piece.clear_to != t:
            piece = run.piece = self._new_piece(run, t, y)
        rate, scale = score_speed(y, self.M, self.V), 1.0 + np.abs(scores(y, self.M)).max()
        te = next_event(piece, self.M, t, target, rate, scale)
        if te is None:
            piece.clear_to = float(target)
            return float(target), piece.flow.state(target - piece.t0)
        z = piece.flow.state(te - piece.t0)
        run.zero_pieces = run.zero_pieces + 1 if te - t <= 1e-14 * max(1.0, abs(t)) else 0
        if run.zero_pieces > MAX_ZERO_PIECES:
            raise SolverError(f"Hardmax: {MAX_ZERO_PIECES} events without motion at t={t:.15g} (a Zeno point, or a "
                              "selection at a tie that the margins do not confirm).")
        forced = self._crossing_pairs(piece, z)
        for i, j in forced:
            run.events.append((float(te), int(i), np.flatnonzero(piece.W[i]).tolist(), int(j)))
        run.piece = self._new_piece(run, te, z, forced)
        return float(te), z

    def _crossing_pairs(self, piece, z):
        """(i, k): token i and the index k that has reached its maximum (or the tie of i that broke)."""
        S = scores(z, self.M)
        scale = 1.0 + np.abs(S).max()
        m = margins(z, piece.W, self.M, scale)
        n = len(z)
        pairs = []
        for i in np.argsort(m[:n])[:n]:
            if m[i] > 1e-9 * scale:
                break
            outside = np.flatnonzero(piece.W[i] == 0)
            if outside.size:
                pairs.append((int(i), int(outside[np.argmax(S[i, outside])])))
        for i in np.flatnonzero(m[n:] < 0):
            inside = np.flatnonzero(piece.W[i] > 0)
            pairs.append((int(i), int(inside[np.argmax(S[i, inside])])))
        return pairs


__all__ = ["Hardmax", "select_weights", "velocity", "scores"]
