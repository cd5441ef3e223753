"""The hardmax limit β → ∞ of self-attention between its events (docs/attention.md, "Hardmax"; §9.3 of
Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on Transformers*).

The scores s_ij = ⟨Q z_i, K z_j⟩ and the velocity of (9.5)–(9.6); the weights the limit of softmax
selects at ties (`select_weights`, the Filippov convex combination); the exact flow of a piece
between two events (`LinearFlow` in R^d, `SphereFlow` on the sphere, `NumericalFlow` and
`sliding_field` where a target moves) and the next event (`next_event`: the first zero of a margin).
`solvers.hardmax.Hardmax` integrates from event to event with them.
"""
from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import solve_ivp
from scipy.linalg import expm
from scipy.sparse.linalg import expm_multiply
from scipy.optimize import brentq

from meanfield.errors import SolverError

TIE_TOL = 1e-11          # scores within TIE_TOL·(1 + max|s|) of the maximum are tied
SLIDE_TOL = 1e-9         # a tie whose spread exceeds SLIDE_TOL·(1 + max|s|) has broken: an event
EVENT_XTOL = 1e-14       # Brent's tolerance on the event time
EVENT_EPS = 1e-13        # a margin below −EVENT_EPS·(1 + max|s|) has crossed (one at zero is a tie that stays)
DROP = 40.0              # a layer log-weight DROP below the largest: the weight (< 4e-18) leaves the tie
SCAN = 0.05              # scan step, in units of 1/rate (the largest speed of the scores)
DENSE_EXPM = 128         # pieces of up to this size take the dense exponential, larger ones expm_multiply


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
