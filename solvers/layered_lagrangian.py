"""`LayeredLagrangian`: the characteristics of a masked model, labels in (σ, x) (docs/causal.md, "Through clustering").

Under a causal mask with an ALiBi position bias λ the density ρ(t, σ, ·) at position σ ∈ (0, 1] moves in the
field of its prefix mean ρ̄(σ) = ∫_0^σ k_λ(σ, r) ρ(r) dr (Duerinckx, Geshkovski, Rossi, *Kinetic theory for
Transformers and the lost-in-the-middle phenomenon*, arXiv 2605.09213; docs/causal.md). At each node s_i
of a `meanfield.transformer.positions.PositionRule` the density ρ(s_i, ·) is carried by its own labels, as
one density is by `solvers.lagrangian.Lagrangian` (docs/mathematics.md §9):

    ρ(t, s_i, Φ_t(s_i, y)) = ρ_0(s_i, y)/J_t(s_i, y),     d/dt log J = div_S X_{s_i}.

The sums over the labels ordered by position go through the shared kernel-sum engine
(`causal_moment_sums`, `meanfield.sums.kernelsums.kernel_sums`: O((M·n)²) for n labels at each of M nodes)
or, for zonal models on S^1 and S^2, through the spectral prefix sums (`layered_spectral_field`,
`meanfield.sums.spectralsums.layered_zonal_sums`: O(M·(n + L² log L))).
"""
from dataclasses import dataclass

import numpy as np

from meanfield.validation import check_callable, check_density_values
from meanfield.errors import InvalidInput
from meanfield.threads import share_out
from meanfield.sums import compiled
from meanfield.sums.kernelsums import kernel_sums
from meanfield.sums.spectralsums import (EPSILON, choose_layered_sums, layered_error_bound, layered_zonal_sums,
                                         node_runs, zonal_sums)
from meanfield.transformer.positions import PositionRule
from meanfield.representations.layered import LayeredNodes
from .base import Solver
from .lagrangian import Lagrangian, LagrangianRun, moment_values, carry_mass, heads_field, moment_field
from .layered import takes_position


def causal_moment_sums(z, values, rule, beta, M=None, chunk=512):
    """The prefix sums (S, c), e^{c_i} S_i = Σ_m W_im Σ_j e^{β⟨z_i, M x_mj⟩} values_mj, of labels in (σ, x).

    ``z`` (P·q, n, d): the n labels x_mj of the density at each node s_m of the position rule ``rule``
    (`meanfield.transformer.positions.PositionRule`, axis 0 in order); ``values`` (P·q, n, p) their moment columns.
    W_im are the prefix weights of `PositionRule.prefix_parts`, ρ̄(s_i) = Σ_m W_im ρ(s_m), so that the sums
    are those of the prefix mean ∫_0^{s_i} k_λ(s_i, r) ρ(r) dr (docs/causal.md). The earlier panels go in
    one pass of `meanfield.sums.kernelsums.kernel_sums` with a causal ``ends`` and the ALiBi ``bias``
    λ(b_p − s_i); the own panel (weights not factorising in i, m) in one pass per node. Returns S
    (P·q·n, p) and c (P·q·n,) for the labels flattened in order."""
    Mpos, n, d = z.shape
    window, across, inner = rule.prefix_parts()
    q = across.shape[1]
    flat, vals = z.reshape(-1, d), values.reshape(Mpos * n, -1)
    node = np.repeat(np.arange(Mpos), n)
    panel = node // q
    ends = panel * q * n                                    # a label sees the panels before its own
    bias = (rule.lam * rule.nodes[node], rule.lam * rule.breaks[1:][panel])
    S, c = kernel_sums(flat, flat, vals * across.ravel()[node][:, None], beta, M=M, chunk=chunk, ends=ends, bias=bias)
    c = np.where(ends > 0, np.broadcast_to(c, ends.shape), -np.inf)
    for i in range(Mpos):
        p, rows = i // q, slice(i * n, (i + 1) * n)
        cols = slice(p * q * n, (p + 1) * q * n)
        Si, ci = kernel_sums(z[i], flat[cols], vals[cols] * np.repeat(inner[p, i % q], n)[:, None], beta, M=M,
                             chunk=chunk)
        top = np.maximum(c[rows], ci)
        S[rows] = S[rows] * np.exp(c[rows] - top)[:, None] + Si * np.exp(ci - top)[:, None]
        c[rows] = top
    return S * window[node][:, None], c


def layered_velocity_divergence(z, weights, rule, beta, *, normalized=True, v=1.0, heads=None, chunk=512,
                                rules=None, sums="direct", threads=1):
    """X_σ and div_S X_σ at labels in (σ, x): ``z`` (P·q, n, d) the labels of the density ρ(s_m, ·) at each
    node of ``rule``, ``weights`` (P·q, n) their masses (each row a probability). The field of a label at
    s_i is that of `velocity_divergence` for the prefix mean ρ̄(s_i) = ∫_0^{s_i} k_λ(s_i, r) ρ(r) dr
    (docs/causal.md; (SA) and (USA), zonal or general heads), its moments from `causal_moment_sums`.
    ``rules``: one rule per head (the same nodes, head h's own ALiBi slope λ_h), default ``rule`` for all.
    ``sums``: "direct" (above) or "spectral" (zonal models on S^1, S^2: `layered_spectral_field`, on
    ``threads`` threads). Returns X (P·q, n, d), div (P·q, n)."""
    if sums == "spectral":
        if heads is not None:
            raise InvalidInput("`heads`: general attention has direct sums only (`sums` must be 'direct').")
        return layered_spectral_field(z, weights, rule, beta, normalized=normalized, v=v, threads=threads)[:2]
    shape = z.shape
    flat = z.reshape(-1, shape[-1])
    values = moment_values(flat, np.asarray(weights, dtype=float).ravel()).reshape(shape[:2] + (-1,))
    if heads is None:
        S, c = causal_moment_sums(z, values, rule, beta, chunk=chunk)
        X, div = moment_field(flat, S, c, beta, normalized, v)
    else:
        X, div = heads_field(flat, lambda M, h: causal_moment_sums(z, values, rule if rules is None else rules[h],
                                                                    beta, M=M, chunk=chunk), beta, normalized, heads)
    return X.reshape(shape), div.reshape(shape[:2])


def layered_spectral_field(z, weights, rule, beta, *, normalized=True, v=1.0, threads=1, out=None, feedforward=None):
    """X_σ, div_S X_σ at labels in (σ, x) (as `layered_velocity_divergence`, zonal models on S^1 and S^2) through
    the spectral prefix sums Zs, G, H of `meanfield.sums.spectralsums.layered_zonal_sums` ((SA) X = v G/Zs,
    div_S X = v(H/Zs − β|G/Zs|²); (USA) X = v e^{|β|}G, div_S X = v e^{|β|}H, assembled in the labels' frame
    by `meanfield.sums.compiled.frame_field`), plus the local term of ``feedforward`` (a
    `meanfield.transformer.feedforward` term: P_x F and div_S(P_x F)) if given, and the bound on their relative
    error (`meanfield.sums.spectralsums.layered_error_bound`). The field of each run of nodes is made on the
    thread of its sums. ``out`` (M, n, d + 1): X and div are written into it (the rates of the labels and of
    their log-Jacobians). Without ``feedforward`` the labels z need not be of unit length (their directions
    count). Returns (X (M, n, d), div (M, n), bound)."""
    M, n, d = z.shape
    out = np.empty((M, n, d + 1)) if out is None else out
    X, div, least, mass = out[..., :d], out[..., d], np.empty(M), np.empty(M)

    def field(run, Zs, g, H, frame):
        compiled.frame_field(Zs, g, H, frame, beta, normalized, v, out[run])
        if feedforward is not None:
            for i in range(run.start, run.stop):      # node by node: the same bits whatever the runs
                F, divF = feedforward.tangent_divergence(z[i])
                X[i] += F
                div[i] += divF
        least[run] = Zs.min(axis=1)
        mass[run] = np.abs(weights[run]).sum(axis=1)           # for the bound, on the run's thread

    layered_zonal_sums(zonal_sums(beta, d, EPSILON), z, weights, rule, threads, each=field)
    return X, div, layered_error_bound(least[:, None], mass, rule)


def unit_labels(z, threads=1):
    """z/|z| for the labels z (M, n, d) of every node, by the runs of nodes of the sums (`node_runs`) on
    ``threads`` threads, one for each 2^17 labels (fewer: waking a thread costs more; 65 536 labels on S^2
    took 0.49 ms on one thread, 0.55 ms on two; 262 144 on S^1 3.4 and 1.8 ms): the same bits."""
    x = np.empty(z.shape)
    threads = max(1, min(threads, z.shape[0] * z.shape[1] >> 17))

    def run(nodes):
        x[nodes] = compiled.normalise(np.ascontiguousarray(z[nodes]))

    share_out(run, node_runs(len(z), threads, z.shape[1], z.shape[2]), threads)
    return x


@dataclass(eq=False, slots=True)
class LayeredRun(LagrangianRun):
    """The per-run values of a `LayeredLagrangian` run."""

    label_state: np.ndarray = None    # the labels (M, n [+ m], d) of the last right-hand side (the sums' choice)


class LayeredLagrangian(Lagrangian):
    """`Lagrangian` of a masked model (``positions=M`` or a `meanfield.transformer.positions.PositionRule`): labels in (σ, x).

    At each node s_i of the position rule the density ρ(s_i, ·) is carried by its own labels (the rule of
    `Lagrangian` in x; masses w_ij = q_j ρ_0(s_i, y_j)). A label at s_i moves in the causal field X_{s_i} of
    the prefix mean ρ̄(s_i) = ∫_0^{s_i} k_λ(s_i, r) ρ(r) dr (docs/causal.md; both masks have this continuum),
    its log-Jacobian by div_S X_{s_i} (`layered_velocity_divergence`: direct kernel sums, causal ``ends`` and
    the ALiBi ``bias`` over the labels ordered by position; or, ``sums`` "spectral" or "auto", the spectral
    prefix sums of `layered_spectral_field` for zonal models under "post", whose error bound ``stats``
    records as the largest met in the run). The masses per position are exact invariants.
    Initial data: ρ0(x, s) or ρ0(x), a layered density Solution (the hand-over of `FourierCircle` /
    `SphericalHarmonics` with ``positions``) or a layered Lagrangian Solution (continued exactly).
    Normalisation "post" or "sqrt-depth"; diagnostics ``mass`` (joint), ``max_density``, ``min_density``,
    ``error_estimate`` (the largest over the positions), ``nodes`` (labels per position).
    """

    normalizations = ("post", "sqrt-depth")
    run_type = LayeredRun
    diagnostic_names = ("mass", "max_density", "min_density", "error_estimate", "nodes")

    def __init__(self, model, nodes=None, *, positions=None, **options):
        if isinstance(positions, str):
            raise InvalidInput("`positions` of a Lagrangian run is a number M (a multiple of 8) or a PositionRule "
                             f"(the labels carry every position exactly: no 'auto'); got {positions!r}.")
        Lagrangian.__init__(self, model, nodes, positions=positions, **options)
        lam = model.position_biases[0]
        self.layers = positions if isinstance(positions, PositionRule) else PositionRule(positions, lam)
        if self.layers.lam != lam:
            raise InvalidInput(f"`positions`: the rule has position_bias {self.layers.lam:g}, the model's first head "
                             f"{lam:g}.")
        self.head_rules = [self.layers if slope == lam else PositionRule(self.layers.size, slope, self.layers.breaks)
                           for slope in model.position_biases]
        self.positions = self.layers.size

    def _rhs(self, run, t, y):
        """ẋ = X_σ(x), ℓ̇ = div_S X_σ(x) for the labels of every position (and the companion's)."""
        d = self.model.dim
        directions = self.model.feedforward is None and all(sums == "spectral" for sums in run.system_sums)
        # the spectral sums take the labels' directions; the direct ones and the feed-forward term unit labels
        x = run.label_state = y[..., :d] if directions else unit_labels(y[..., :d], self.threads)
        out = np.empty_like(y)
        for k, ((sl, w), sums) in enumerate(zip(run.systems, run.system_sums)):
            if sums == "spectral":                     # under "post" (`check_sums`): the field as it is
                bound = layered_spectral_field(x[:, sl], w, self.layers, self.model.beta, normalized=self.normalized,
                                               v=self.v, threads=self.threads, out=out[:, sl],
                                               feedforward=self.model.feedforward)[2]
                if k == 0:                             # the fine labels' bound: the largest over the run
                    run.sums_error_bound = max(run.sums_error_bound, bound)
                continue
            X, div = layered_velocity_divergence(x[:, sl], w, self.layers, self.model.beta, normalized=self.normalized,
                                                 v=self.v, heads=self.heads, chunk=self.chunk, rules=self.head_rules)
            X, div = self._with_feedforward(x[:, sl], *self._scaled(t, None, None, X, div))
            out[:, sl, :d] = X
            out[:, sl, d] = div
        return out

    def _start_run(self, run, values, coarse_values, labels=None, coarse_labels=None, state=None):
        """The labels of every position (``values`` (M, n) ρ_0(s_i, y_j)) and the initial state (M, n [+ m], d + 1)."""
        n = self.nodes
        run.systems = [(slice(0, n), self.q * values)]
        companion = None
        if coarse_values is not None:
            companion = (self.coarse[0], self.coarse[1], coarse_values)
            run.systems.append((slice(n, n + len(self.coarse[1])), self.coarse[1] * coarse_values))
        run.rep = LayeredNodes(self.layers, self.labels, self.q, values, companion, panels=self.panels,
                               cluster_tol=self.cluster_tol, min_mass=self.min_mass)
        if state is None:
            pts = self.labels if companion is None else np.concatenate([self.labels, companion[0]])
            one = np.concatenate([pts, np.zeros((len(pts), 1))], axis=1)
            state = np.repeat(one[None], self.positions, axis=0)
        run.label_state = state[..., :self.model.dim]
        self._choose_sums(run)
        return state

    def _to_data(self, run, y):
        d = self.model.dim
        out = np.array(y, dtype=float, copy=True)
        out[..., :d] /= np.linalg.norm(out[..., :d], axis=-1, keepdims=True)
        return out

    def _choose_sums(self, run):
        """The sums of each system of labels at the run's labels ``run.label_state`` (`meanfield.sums.spectralsums.
        choose_layered_sums`: spectral for "auto" where faster and the bound at these labels is at most
        ``sums_tol``); the fine labels' are recorded, their bound then the largest met in the run."""
        chosen = [choose_layered_sums(self.sums, self.model, run.label_state[:, sl], w, self.layers, tol=self.sums_tol,
                                      threads=self.threads) for sl, w in run.systems]
        run.system_sums = [kind for kind, _ in chosen]
        run.sums, run.sums_error_bound = chosen[0]

    def _per_position(self, values_at):
        """Stack values_at(s_i) over the nodes; a ValueError names the position."""
        rows = []
        for i, s in enumerate(self.layers.nodes):
            try:
                rows.append(values_at(s))
            except ValueError as exc:
                raise InvalidInput(f"{exc} (at the position s={s:.6g}, node {i} of {self.positions})") from None
        return np.stack(rows)

    def _initial_from_callable(self, run, rho0, normalize):
        """ρ0(x, s) (or ρ0(x)) at the labels of each node, mass 1 per position within 1e-6 (or rescaled)."""
        check_callable(rho0, "rho0")
        at = (lambda s: lambda x: rho0(x, s)) if takes_position(rho0) else (lambda s: rho0)

        def values(s, pts, q):
            v, mass = check_density_values(self._values(at(s), pts, "rho0"), "rho0", quadrature_weights=q,
                                           normalize=normalize)
            return v, mass

        fine = self._per_position(lambda s: values(s, self.labels, self.q)[0])
        coarse = None
        if self.estimate:
            coarse = self._per_position(lambda s: values(s, self.coarse[0], self.coarse[1])[0] if normalize else
                                        self._values(at(s), self.coarse[0], "rho0"))
        return self._start_run(run, fine, coarse)

    def _initial_from_solution(self, run, sol):
        """Continue a layered Lagrangian Solution exactly, or a layered density Solution from its density at
        the labels of each node (interpolated in σ where the rules differ)."""
        rep = sol.representation
        if isinstance(rep, LayeredNodes):
            data = np.array(sol.data[-1], dtype=float)
            run.systems = [(slice(0, rep.n), rep.weights)]
            if rep.companion is not None:
                run.systems.append((slice(rep.n, data.shape[1]), rep.companion[1] * rep.companion[2]))
            run.rep, run.label_state = rep, data[..., :self.model.dim]
            self._choose_sums(run)
            return data
        if not (rep.is_density and rep.layered):
            raise InvalidInput("`initial`: a layered Lagrangian run continues layered density Solutions (a masked "
                             "FourierCircle / SphericalHarmonics run with positions) or a density callable ρ0(x, s).")
        data = sol.data[-1]
        values = (lambda pts, q: self._per_position(lambda s: carry_mass(
            self._clipped(sol.density(pts, -1, position=s)), q, rep.mass(data, position=s))))
        return self._start_run(run, values(self.labels, self.q), values(*self.coarse[:2]) if self.estimate else None)

    @staticmethod
    def _clipped(vals):
        """Density values at the labels; round-off negatives (|ρ| <= 1e-8 max ρ) become 0."""
        vals = np.asarray(vals, dtype=float)
        top = float(vals.max())
        if not np.all(np.isfinite(vals)) or vals.min() < -1e-8 * top:
            raise InvalidInput(f"`initial`: the Solution's density is not finite or negative at the labels (min "
                             f"{vals.min():.3g}, max {top:.3g}); continue from an earlier, resolved time.")
        return np.clip(vals, 0.0, None)

    def _initial_from_grid(self, run, grid, normalize):
        return Solver._initial_from_grid(self, run, grid, normalize)

    def _diagnostics(self, run, t, y):
        """Joint mass, ρ range over the labels of all positions, error estimate, labels per position."""
        rep, data, out = run.rep, self._to_data(run, y), {}
        if "mass" in self.diagnostics:
            out["mass"] = rep.mass(data)
        if self.diagnostics & {"max_density", "min_density"}:
            rho = rep.node_density(data)
            out.update({"max_density": float(rho.max()), "min_density": float(rho.min())})
        if "error_estimate" in self.diagnostics:
            est = np.nan
            if self.model.dim == 2 or t >= run.t_eval[-1]:
                est = run.last_estimate = rep.error_estimate(data)
            out["error_estimate"] = est
        if "nodes" in self.diagnostics:
            out["nodes"] = float(rep.n)
        return out

    def _stats(self, run):
        return {**Lagrangian._stats(self, run), "positions": self.positions}

    def solve_adaptive(self, initial, t_eval, **options):
        raise InvalidInput("`solve_adaptive` refines the labels of one density; a layered run (`positions`) has "
                         "fixed labels: pass `nodes` or `panels`.")


__all__ = ["LayeredLagrangian", "layered_velocity_divergence", "layered_spectral_field", "causal_moment_sums"]
