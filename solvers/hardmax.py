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

from meanfield.errors import InvalidInput, SolverError, UnsupportedModel
from meanfield.representations.particles import ParticleCloud
from meanfield.validation import NORMALIZE_POINTS, NORMALIZE_WEIGHTS, check_points, check_weights

from .base import Run, Solver
from .hardmax_dynamics import (LinearFlow, NumericalFlow, Piece, SCAN, SphereFlow, margins, next_event, score_speed,
                               scores, select_weights, sliding_field, velocity)

MAX_ZERO_PIECES = 50     # consecutive pieces of zero length before the run reports a Zeno point


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
