"""`Gaussian`: the exact continuum of (SA) in R^d for Gaussian data (docs/gaussian.md; docs/mathematics.md §14).

Without layer normalisation, tokens in R^d move by ẋ_i = Σ_h V_h Σ_j softmax_j(β⟨Q_h x_i, K_h x_j⟩) x_j
(Section 9 of Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on
Transformers*; the dynamics of *The emergence of clusters in self-attention dynamics*). For
μ = N(m, Σ) the softmax average is the mean of the Gaussian tilted by e^{⟨βK_hᵀQ_h x, y⟩}, which is
m + βΣK_hᵀQ_h x, so the field is affine (Castin, Ablin, Carrillo, Peyré, arXiv 2501.18322):

    v(x) = Σ_h V_h (m + βΣ M_h x),   M_h = K_hᵀQ_h,

and an affine flow keeps Gaussians Gaussian. With B = β Σ_h V_h Σ M_h the moments solve

    ṁ = Σ_h V_h m + B m,     Σ̇ = BΣ + ΣBᵀ,

a quadratic (Riccati-type) system whose covariance may blow up in finite time. In d = 1 with
a = β v q k: σ²(t) = σ₀²/(1 − 2aσ₀²t), infinite at t* = 1/(2aσ₀²).

L2 and Sinkhorn attention (docs/attention.md) keep the field affine too, with other b and B
(`affine_field`, docs/gaussian.md); ``Model(attention=...)`` chooses.

(USA) is refused: its field Σ_j e^{β⟨Qx, Ky⟩}Vx_j/n is the Gaussian's moment generating function
times an affine map, which is not affine, so Gaussians do not stay Gaussian. Noise is refused too
(the model's noise is the sphere's).
"""
from dataclasses import dataclass

import numpy as np

from meanfield.errors import InvalidInput, SolverError, UnsupportedModel
from meanfield.representations.gaussian import GaussianMoments, join_moments, split_moments

from .base import Run, Solver

BLOWUP_GROWTH = 1e10     # the largest covariance eigenvalue, relative to its start, at which a run reports a blow-up


class CovarianceBlowUp(SolverError):
    """The covariance Σ of the Gaussian continuum blows up in finite time.

    Attributes: ``t`` (the last time reached), ``t_blowup`` (the blow-up time, estimated from the
    Riccati growth λ ~ c/(t* − t) of the largest eigenvalue λ of Σ: t* = t + λ/λ̇, exact in d = 1),
    ``solution`` (the saved times before ``t``).

    Parameters
    ----------
    message : str
        What happened.
    solution : Solution, optional
        The saved times before ``t``.
    t : float, optional
        The last time reached.
    t_blowup : float, optional
        The estimated blow-up time t*.

    Examples
    --------
    In d = 1 directions with Q = K = V = I, Σ(t) = Σ0/(1 − 2βt): t* = 1/(2β) for Σ0 = I.

    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> try:
    ...     solvers.Gaussian(mf.Model(beta=0.25, dim=2)).solve((np.zeros(2), np.eye(2)), [0.0, 4.0],
    ...                                                        progress=False)
    ... except solvers.CovarianceBlowUp as exc:
    ...     print(round(exc.t_blowup, 3), exc.t < exc.t_blowup, isinstance(exc, mf.SolverError))
    2.0 True True
    """

    def __init__(self, message, solution=None, t=None, t_blowup=None):
        super().__init__(message, solution)
        self.t, self.t_blowup = t, t_blowup


def affine_field(m, S, beta, heads, attention="softmax", eps=1.0):
    """(b, B) of the affine attention field v(x) = b + Bx of N(m, Σ) under (SA) in R^d, ``heads`` a list of
    (M_h = K_hᵀQ_h, V_h) or (M_h, V_h, K_hᵀK_h) (docs/gaussian.md, docs/attention.md; Castin, Ablin,
    Carrillo, Peyré, arXiv 2501.18322).

    Each head's attention average is b_h + γ T_h M_h x, so b = Σ_h V_h b_h and B = γ Σ_h V_h T_h M_h:

    * softmax (γ = β): b_h = m, T_h = Σ (the mean of the Gaussian tilted by e^{β⟨Q_h x, K_h y⟩});
    * L2, weights e^{−(β/2)‖Q_h x − K_h y‖²} (γ = β): the tilt also has the precision βK_hᵀK_h, so
      with P_h = (I + βΣK_hᵀK_h)⁻¹, T_h = P_hΣ and b_h = P_h m;
    * Sinkhorn (γ = β/ε): the conditional mean of the Gaussian entropic plan of μ with itself, whose
      conditional covariance is T_h = Σ^{1/2} φ(R_h) Σ^{1/2}, R_h = γ² Σ^{1/2} M_hΣM_hᵀ Σ^{1/2},
      φ(r) = 2/(1 + √(1 + 4r)); b_h = m − γ T_h M_h m (the field averages to V_h m).
    """
    d = m.size
    gain = beta / eps if attention == "sinkhorn" else beta
    root = _sqrtm(S) if attention == "sinkhorn" else None
    B = np.zeros((d, d))
    b = np.zeros(d)
    for head in heads:
        M, V = head[0], head[1]
        if attention == "softmax":
            T, bh = S, m
        elif attention == "l2":
            P = np.linalg.inv(np.eye(d) + beta * S @ head[2])
            T, bh = P @ S, P @ m
        else:
            R = gain ** 2 * root @ M @ S @ M.T @ root
            vals, vecs = np.linalg.eigh(0.5 * (R + R.T))
            phi = 2.0 / (1.0 + np.sqrt(1.0 + 4.0 * np.clip(vals, 0.0, None)))
            T = root @ (vecs * phi) @ vecs.T @ root
            bh = m - gain * T @ M @ m
        B += gain * V @ T @ M
        b += V @ bh
    return b, B


def moment_rates(m, S, beta, heads, attention="softmax", eps=1.0):
    """(ṁ, Σ̇) of N(m, Σ) under (SA) in R^d: with the affine field v(x) = b + Bx (`affine_field`),
    ṁ = b + Bm and Σ̇ = BΣ + ΣBᵀ (docs/gaussian.md)."""
    b, B = affine_field(m, S, beta, heads, attention, eps)
    BS = B @ S
    return b + B @ m, BS + BS.T


def _sqrtm(S):
    """The symmetric square root of the covariance S."""
    vals, vecs = np.linalg.eigh(0.5 * (S + S.T))
    return (vecs * np.sqrt(np.clip(vals, 0.0, None))) @ vecs.T


@dataclass(eq=False, slots=True)
class GaussianRun(Run):
    """The per-run values of a `Gaussian` run."""

    scale: float = 1.0                # the largest eigenvalue of the initial covariance (blow-up threshold)


class Gaussian(Solver):
    """The Gaussian continuum of (SA) in R^d: the mean and covariance of N(m, Σ), exactly.

    Parameters
    ----------
    model : `meanfield.Model` with ``normalized=True`` ((SA)), no noise, any Q, K, V and heads, any dim,
        ``attention`` "softmax", "l2" or "sinkhorn" (with ``sinkhorn_eps``).
    domain : "euclidean" (the only one: on the sphere Gaussians are not preserved).
    {threads}

    Raises
    ------
    UnsupportedModel
        (USA) (Gaussians do not stay Gaussian), noise, a mask or a model part it does not take.
    ValueError
        ``domain`` other than "euclidean".

    Notes
    -----
    ``solve(initial, t_eval)``: ``initial`` a pair (m0, S0) (mean (d,), covariance (d, d), symmetric
    positive definite); or samples (points (n, d), weights (n,)) replaced by their own mean and
    covariance; or a Gaussian Solution (continued). Steppers "dopri5" (default, rtol 1e-10) and "bs32".
    ``sol.mean(i)``, ``sol.covariance(i)``; ``sol.density(x, i)`` is the Lebesgue density and
    ``sol.measure(i, n)`` n quasi-random samples. A covariance that blows up stops the run with
    `CovarianceBlowUp` carrying ``t_blowup`` and the Solution so far.

    Examples
    --------
    With Q = K = V = I the covariance solves Σ̇ = 2βΣ², Σ(t) = Σ0/(1 − 2βt), which blows up at
    t* = 1/(2β) for Σ0 = I (docs/gaussian.md):

    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> solver = solvers.Gaussian(mf.Model(beta=0.5, dim=2))
    >>> sol = solver.solve((np.zeros(2), np.eye(2)), [0.0, 0.5], progress=False)
    >>> np.round(sol.covariance(-1), 6).tolist()
    [[2.0, 0.0], [0.0, 2.0]]

    A run beyond t* stops with `CovarianceBlowUp` (its example).
    """

    steppers = ("dopri5", "bs32")
    stepper_defaults = {"rtol": 1e-10, "atol": 1e-12}
    run_type = GaussianRun
    mass_by_construction = True     # a Gaussian law has mass 1: a report notes the mass
    attentions = ("softmax", "sinkhorn", "l2")     # docs/attention.md: each keeps Gaussians Gaussian

    @classmethod
    def examples(cls):
        """Small runs (`solvers.Solver.examples`): in R^3, and with Q ≠ I."""
        from meanfield.transformer.model import Model

        return {"Gaussian": (lambda: cls(Model(beta=1.0, dim=3), domain="euclidean"),
                             [(np.zeros(3), 0.1 * np.eye(3)), (np.array([0.5, 0.0, -0.2]), np.diag([0.1, 0.2, 0.3]))],
                             {}),
                "Gaussian-Q": (lambda: cls(Model(beta=1.0, dim=3, Q=np.diag([1.0, 0.5, 0.2]))),
                               [(np.zeros(3), 0.1 * np.eye(3)), (np.ones(3), np.diag([0.1, 0.2, 0.05]))], {})}

    def __init__(self, model, *, domain="euclidean", threads=None):
        Solver.__init__(self, model, threads)
        if domain != "euclidean":
            raise InvalidInput(f"`domain` must be 'euclidean' for the Gaussian continuum (Gaussians live in R^d; on the "
                             f"sphere no family of them is preserved), got {domain!r}.")
        if not model.normalized:
            raise UnsupportedModel("`normalized`=False ((USA)) does not keep Gaussians Gaussian: its field is the "
                                   "Gaussian's moment generating function times an affine map; use solvers.Particles "
                                   "with domain='euclidean'.")
        if model.noise:
            raise UnsupportedModel(f"`noise`={model.noise:g}: the model's noise is Brownian motion on the sphere, "
                                   "which R^d does not have; use noise=0.")
        self.heads = [(K.T @ Q, V, K.T @ K) for Q, K, V in model.heads]

    # -- Solver contract ---------------------------------------------------------------------------
    def _representation(self, run):
        return GaussianMoments(self.model.dim)

    def _rhs(self, run, t, y):
        """(ṁ, Σ̇) flattened, `moment_rates`."""
        m, S = split_moments(y, self.model.dim)
        dm, dS = self._rates(m, S)
        return join_moments(dm, dS)

    def _rates(self, m, S):
        return moment_rates(m, S, self.model.beta, self.heads, self.model.attention, self.model.sinkhorn_eps)

    def _initial_from_measure(self, run, first, second, normalize):
        """(m0, S0), or samples (points, weights) through their mean and covariance."""
        d = self.model.dim
        first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
        if first.shape == (d,) and second.shape == (d, d):
            return self._initial_from_data(run, join_moments(first, second), normalize)
        if first.ndim == 2 and first.shape[1] == d and second.shape == (first.shape[0],):
            if not np.all(np.isfinite(first)) or np.any(second < 0) or not second.sum() > 0:
                raise InvalidInput("`initial` samples must be finite with non-negative weights of positive sum.")
            w = second / second.sum()
            m = w @ first
            z = first - m
            return self._initial_from_data(run, join_moments(m, (z * w[:, None]).T @ z), normalize)
        raise InvalidInput(f"`initial` must be (mean (d,), covariance (d, d)) or (points (n, d), weights (n,)) with "
                         f"d = {d}, got shapes {first.shape} and {second.shape}.")

    def _initial_from_data(self, run, data, normalize):
        d = self.model.dim
        data = np.asarray(data, dtype=float)
        if data.shape != (d + d * d,):
            raise InvalidInput(f"`initial` as data must be the finite vector [m, vec Σ] of length {d + d * d}, "
                             f"got shape {data.shape}.")
        if not np.all(np.isfinite(data)):
            bad = int(np.flatnonzero(~np.isfinite(data))[0])
            where = f"the mean m[{bad}]" if bad < d else f"the covariance Σ[{(bad - d) // d}, {(bad - d) % d}]"
            raise InvalidInput(f"`initial` must be finite: {where} is {data[bad]}.")
        m, S = split_moments(data, d)
        if not np.allclose(S, S.T, rtol=0, atol=1e-12 * max(1.0, np.abs(S).max())):
            raise InvalidInput("`initial` covariance must be symmetric.")
        eigenvalues = np.linalg.eigvalsh(S)
        if not eigenvalues[0] > 0:
            raise InvalidInput("`initial` covariance must be positive definite (its smallest eigenvalue is <= 0).")
        run.scale = float(eigenvalues[-1])
        return join_moments(m, 0.5 * (S + S.T))

    def _initial_from_callable(self, run, rho0, normalize):
        raise InvalidInput("`initial`: the Gaussian continuum starts from (mean, covariance) or from samples "
                         "(points, weights), not from a density callable.")

    def _monitor(self, run, t, y):
        """Stop with `CovarianceBlowUp` once the largest eigenvalue of Σ has grown by BLOWUP_GROWTH."""
        m, S = split_moments(y, self.model.dim)
        vals, vecs = np.linalg.eigh(S)
        top = float(vals[-1])
        if top > BLOWUP_GROWTH * run.scale:
            u = vecs[:, -1]
            rate = float(u @ self._rates(m, S)[1] @ u)
            t_star = t + top / rate if rate > 0 else t
            raise CovarianceBlowUp(
                f"the covariance blows up in finite time: its largest eigenvalue grew by {top / run.scale:.2g} "
                f"by t={t:.9g}, blow-up time t* = {t_star:.9g} (Riccati growth, docs/gaussian.md); the saved times "
                f"before it are in `exc.solution`.", t=t, t_blowup=t_star)

    def _stats(self, run):
        return {"domain": "euclidean"}


__all__ = ["Gaussian", "CovarianceBlowUp", "moment_rates", "affine_field"]
