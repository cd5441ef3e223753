"""N-particle solver for self-attention dynamics on S^{d-1} ((2.3)–(2.7), (3.2); docs/mathematics.md §1) and in R^d (Section 9.2; the companion paper).

The vector field of weighted particles μ = Σ_j w_j δ_{x_j} (Σ w_j = 1), for heads h = 1..H
(one head unless the model has ``heads``), M_h = Q_hᵀK_h:

    (SA)   X_i = P_{x_i} Σ_h Σ_j w_j e^{β⟨x_i, M_h x_j⟩} V_h x_j / Σ_j w_j e^{β⟨x_i, M_h x_j⟩}   (2.3), (2.7), (3.2)
    (USA)  X_i = P_{x_i} Σ_h Σ_j w_j e^{β⟨x_i, M_h x_j⟩} V_h x_j                            (USA), (3.8)

with P_x y = y − ⟨x, y⟩x. Equal weights w_j = 1/n give (SA) and (USA) exactly. Numerics:

* the sums S_i = Σ_j w_j e^{L_ij − c_i}[V x_j, 1] are evaluated in blocks of ``chunk`` rows and
  columns (memory O(n·d + chunk²)) with a shift c_i: none when |L| <= 300 (e^L is then a
  normal float), c_i = β for a zonal head (⟨x_i, x_j⟩ <= 1 = ⟨x_i, x_i⟩: exact rescaling
  e^{β⟨x_i,x_j⟩} = e^β e^{β(⟨x_i,x_j⟩−1)}), else a running row maximum (log-sum-exp);
* (SA) divides by the last column (the shift cancels); (USA) multiplies by e^{c_i}, which is
  genuinely of size e^β: beyond e^β > 1e300 (β > 690) the velocity is not representable and
  `solve` asks for ``rescale_time=True`` (time τ = e^β t, velocity e^{−β}X, exact);
* time stepping: the shared adaptive integrator with retraction x ← x/|x| (``scheme="adaptive"``),
  the authors' Euler-then-normalise step (``scheme="euler-normalize"``, docs/mathematics.md §1), and for
  noise ν > 0 the Euler–Maruyama step of the projected Stratonovich SDE (docs/mathematics.md §6)
  x ← N(x + h X(x) + sqrt(2νh) P_x ξ), ξ ~ N(0, I_d), N(y) = y/|y|; the normalisation supplies
  the Itô drift −ν(d−1)x h in expectation (|x + s P_xξ|² = 1 + 2νh|P_xξ|², E|P_xξ|² = d − 1),
  so the law solves the Fokker–Planck equation of docs/mathematics.md §6 (weak order 1; for pure noise one step maps
  E⟨x, x0⟩ to r(h)E⟨x, x0⟩ exactly, r(h) = E(1 + 2νhχ²_{d−1})^{−1/2} = 1 − ν(d−1)h + O(h²)).
"""
import numpy as np
from scipy.linalg import expm

from meanfield._checks import check_int, check_points, check_real, check_weights
from meanfield.diagnostics import clustered_pair_fraction, count_clusters, w1_to_nearest_dirac
from meanfield.errors import UnsupportedModel
from meanfield.representations.particles import ParticleCloud

from .base import Solver

_NO_SHIFT_MAX = 300.0      # |β⟨x, M y⟩| below this: e^L needs no shift
_EXP_MAX = 690.0           # e^c representable with room for the bounded factor
_EYE_TOL = 1e-14


class Particles(Solver):
    """Weighted particles on S^{d-1} (or in R^d) under (SA)/(USA), general Q, K, V, multi-head.

    Parameters
    ----------
    model : `meanfield.Model` (any dim, any heads; noise ν adds sqrt(2ν)·P_x∘dB, docs/mathematics.md §6).
    chunk : int >= 1
        Block size of the pairwise sums (memory O(n·d + chunk²) per realisation).
    diagnostics : "auto" | "full" | "none"
        What is recorded at each saved time besides the energy: "auto" records the clustered-pair
        fraction and the number of clusters at tolerance ``delta`` when n <= 4096, and W1 to the
        nearest Dirac mass for a single realisation with n <= 1024; "full" always records all
        three (O(n²) per saved time and a loop over realisations for W1); "none" nothing.
    delta : float in (0, 2]
        Tolerance δ of the cluster diagnostics (⟨x_i, x_j⟩ >= 1 − δ), default 1e-3 (Figure 3).

    Notes
    -----
    ``solve(x0, t_eval, weights=None, rng=None, ...)``: ``x0`` positions (n, d) or (B, n, d) (B
    realisations sharing the weights, computed in one vectorised evaluation), a ``(points, weights)``
    pair, or a particle Solution (continued). Steppers: "dopri5" (default without noise) and "bs32"
    with the retraction x ← x/|x|; "euler-maruyama" (default with noise: the projected Stratonovich
    SDE, weak order 1) and "euler-normalize" (the authors' x ← N(x + dt·Σ_h A_h V_h x), docs §1).
    ``scheme="adaptive" | "euler-normalize"`` is accepted as another name for ``method``. Options:
    ``weights`` (n,) non-negative summing to 1 (default 1/n); ``rng`` seed or Generator for the
    noise; ``domain="euclidean"`` for the R^d dynamics ẋ_i = Σ_j P_ij V x_j of the companion paper
    (β multiplies ⟨Qx, Ky⟩); ``rescaled=True`` (euclidean, one head, adaptive) integrates
    z_i = e^{−tV}x_i ((9.2)–(9.3)); ``rescale_time=True`` ((USA)) integrates in τ = e^β t, required
    for β > 690. Failures (NaN/inf) raise `NonFiniteState` naming t and the step, with ``.solution``.
    """

    steppers = ("dopri5", "bs32", "euler-maruyama", "euler-normalize")
    solve_options = {"weights": None, "rng": None, "domain": "sphere", "rescaled": False, "rescale_time": False}
    positional_options = ("weights", "rng")
    retracts = True

    def __init__(self, model, *, chunk=512, diagnostics="auto", delta=1e-3):
        super().__init__(model)
        self.chunk = check_int(chunk, "chunk", low=1)
        if diagnostics not in ("auto", "full", "none"):
            raise ValueError(f"`diagnostics` must be 'auto', 'full' or 'none', got {diagnostics!r}.")
        self.diagnostics_level = diagnostics
        self.delta = check_real(delta, "delta", low=0.0, low_open=True, high=2.0)
        d = model.dim
        self._heads = []
        for Q, K, V in model.heads:
            M = Q.T @ K
            identity = bool(np.allclose(M, np.eye(d), rtol=0, atol=_EYE_TOL))
            v = V[0, 0]
            scalar_v = bool(np.allclose(V, v * np.eye(d), rtol=0, atol=_EYE_TOL))
            self._heads.append({"M": None if identity else M, "V": V, "v": v if scalar_v else None,
                                "norm": 1.0 if identity else float(np.linalg.norm(M, 2))})

    # -- the vector field ------------------------------------------------------------------------
    def _shift_kind(self, head, x, domain):
        """'none', 'fixed' (c = β, zonal) or 'running' (log-sum-exp) for this head and state."""
        beta = self.model.beta
        if domain == "sphere":
            if beta * head["norm"] <= _NO_SHIFT_MAX:
                return "none"
            return "fixed" if head["M"] is None else "running"
        r2 = float(np.max(np.einsum("...d,...d->...", x, x)))
        return "none" if beta * head["norm"] * r2 <= _NO_SHIFT_MAX else "running"

    def _attention_sums(self, x, head, w, domain):
        """S_i = Σ_j w_j e^{β⟨x_i, M x_j⟩ − c_i} [V x_j, 1] and the shift c_i (0-d if fixed), in blocks
        of the shared kernel-sum engine."""
        from meanfield.kernelsums import kernel_sums

        M, V = head["M"], head["V"]
        d = x.shape[-1]
        vals = x * head["v"] if head["v"] is not None else x @ V.T
        rhs = np.empty(x.shape[:-1] + (d + 1,))
        np.multiply(vals, w[:, None], out=rhs[..., :d])
        rhs[..., d] = w
        return kernel_sums(x, x, rhs, self.model.beta, M=M, shift=self._shift_kind(head, x, domain), chunk=self.chunk)

    def _field(self, run, x, w, project, domain="sphere", log_time_factor=0.0):
        """Σ_h (attention output) at the particles x, projected onto the tangent spaces if asked."""
        out = None
        d = x.shape[-1]
        for head in self._heads:
            acc, c = self._attention_sums(x, head, w, domain)
            if self.model.normalized:
                y = acc[..., :d] / acc[..., d:]
            else:
                scale = np.exp(np.asarray(c) - log_time_factor)
                y = acc[..., :d] * (scale[..., None] if np.ndim(scale) else scale)
            out = y if out is None else out + y
        if project:
            out = out - np.einsum("...d,...d->...", x, out)[..., None] * x
        return out

    def velocity(self, x, weights=None, *, rescale_time=False):
        """X[μ](x_i) at the particles ((2.3)/(2.7)/(3.2)): x (n, d) or (B, n, d) on the sphere.

        ``weights`` (n,) default 1/n. With ``rescale_time=True`` ((USA) only) returns e^{−β}X, the
        velocity in τ = e^β t (finite for every β).
        """
        x = check_points(x, "x0", dim=self.model.dim, min_ndim=2)
        w = check_weights(weights, x.shape[-2])
        shift = self.model.beta if (rescale_time and not self.model.normalized) else 0.0
        return self._field(None, x, w, project=True, log_time_factor=shift)

    def _choose_method(self, method, options):
        scheme = options.pop("scheme", None)
        if scheme is not None:
            if scheme not in ("adaptive", "euler-normalize"):
                raise ValueError(f"`scheme` must be 'adaptive' or 'euler-normalize', got {scheme!r}.")
            if method is not None:
                raise ValueError("pass either `method` or `scheme`, not both.")
            if scheme == "euler-normalize":
                return scheme
        if method is None:
            return "euler-maruyama" if self.model.noise > 0 else "dopri5"
        return method

    def _configure(self, run):
        o = run.options
        domain, rescaled = o["domain"], o["rescaled"]
        if domain not in ("sphere", "euclidean"):
            raise ValueError(f"`domain` must be 'sphere' or 'euclidean', got {domain!r}.")
        if not isinstance(rescaled, (bool, np.bool_)):
            raise ValueError(f"`rescaled` must be True or False, got {rescaled!r}.")
        if rescaled and domain != "euclidean":
            raise ValueError("`rescaled=True` (z = e^{-tV} x, (9.2)-(9.3)) needs domain='euclidean'.")
        if rescaled and len(self.model.heads) != 1:
            raise UnsupportedModel("`rescaled=True` needs a single head (one value matrix V).")
        adaptive = run.method in ("dopri5", "bs32")
        if rescaled and not adaptive:
            raise ValueError("`rescaled=True` is only available with the adaptive methods (and without noise).")
        if self.model.noise > 0 and adaptive:
            raise ValueError(f"`method`={run.method!r} is deterministic; particles with noise > 0 use "
                             "method='euler-maruyama' (default) or 'euler-normalize'.")
        beta = self.model.beta
        if o["rescale_time"]:
            if self.model.normalized:
                raise ValueError("`rescale_time=True` is for (USA) only (normalized=False); (SA) velocities are bounded.")
            run.log_time_factor = beta
        else:
            run.log_time_factor = 0.0
            if (not self.model.normalized and domain == "sphere"
                    and beta * max(h["norm"] for h in self._heads) > _EXP_MAX):
                raise ValueError(f"(USA) with `beta`={beta:g}: the velocity is of size e^beta, beyond float64 for "
                                 f"beta > {_EXP_MAX:g}. Pass rescale_time=True to integrate in tau = e^beta t.")
        run.domain, run.rescaled = domain, bool(rescaled)
        run.retracts = domain == "sphere"

    def _rhs(self, run, t, y):
        w, domain = run.weights, run.domain
        if domain == "sphere":
            return self._field(run, y, w, True, domain, run.log_time_factor)
        if not run.rescaled:
            return self._field(run, y, w, False, domain)
        # rescaled form (9.2)–(9.3): x = e^{tV} z, ż_i = −V z_i + e^{−tV} Σ_j A_ij V x_j
        V = self.model.V
        E = expm(t * V)
        f = self._field(run, y @ E.T, w, False, domain)
        return -(y @ V.T) + f @ np.linalg.inv(E).T

    def _euler_velocity(self, run, t, y):
        """The authors' unprojected update direction Σ_h A_h V_h x (euler-normalize)."""
        if run.domain != "sphere":
            return self._rhs(run, t, y)
        return self._field(run, y, run.weights, False, run.domain, run.log_time_factor)

    def _tangent_noise(self, run, y, xi):
        if run.domain == "sphere":
            xi -= np.einsum("...d,...d->...", y, xi)[..., None] * y
        return xi

    # -- Solver contract -------------------------------------------------------------------------
    def _initial_from_data(self, run, x0, normalize, weights=None):
        x = self._check_x(x0, normalize, run.domain)
        w = run.options["weights"] if weights is None else weights
        if weights is not None and run.options["weights"] is not None:
            raise ValueError("`weights` given twice: in the (points, weights) pair and as `weights`.")
        run.weights = check_weights(w, x.shape[-2], normalize=normalize)
        return x

    def _initial_from_measure(self, run, points, weights, normalize):
        return self._initial_from_data(run, points, normalize, weights=np.asarray(weights, dtype=float))

    def _initial_from_callable(self, run, rho0, normalize):
        raise ValueError("`x0` must be particle positions (n, d) or (B, n, d), a (points, weights) pair or a particle "
                         "Solution; to start from a density, draw particles with meanfield.sample(density, n, dim).")

    def _initial_from_solution(self, run, sol):
        if sol.representation.name != "particles":
            raise ValueError(f"`x0` is a {sol.representation.name!r} Solution; continue it with its own solver, or "
                             "sample its last measure: meanfield.sample / sol.measure(-1).")
        w = sol.weights if run.options["weights"] is None else None
        return self._initial_from_data(run, sol.positions[-1], False, weights=w)

    def _representation(self, run):
        return ParticleCloud(run.weights, self.model.dim, domain=run.domain)

    def _retract(self, run, y):
        return y / np.linalg.norm(y, axis=-1, keepdims=True)

    def _diagnostics(self, run, t, y):
        level = self.diagnostics_level
        out = {}
        if level == "none" or run.domain != "sphere":
            return out
        n = y.shape[-2]
        if level == "full" or n <= 4096:
            out["clustered_fraction"] = clustered_pair_fraction(y, self.delta, chunk=self.chunk)
            out["clusters"] = count_clusters(y, self.delta, chunk=self.chunk)
        if level == "full" or (y.ndim == 2 and n <= 1024):
            out["w1_to_dirac"] = w1_to_nearest_dirac(y, run.weights)
        return out

    def _check_x(self, x0, normalize, domain):
        d = self.model.dim
        name = "x0"
        if domain == "sphere":
            x = check_points(x0, name, dim=d, normalize=normalize, min_ndim=2)
        else:
            try:
                x = np.asarray(x0, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"`{name}` must be an array of shape (n, d) or (B, n, d).") from None
            if x.ndim < 2 or x.shape[-1] != d:
                raise ValueError(f"`{name}` must have shape (n, {d}) or (B, n, {d}), got {x.shape}.")
            if not np.all(np.isfinite(x)):
                raise ValueError(f"`{name}` contains NaN or inf.")
        if x.ndim not in (2, 3) or x.shape[-2] < 1:
            raise ValueError(f"`{name}` must have shape (n, {d}) or (B, n, {d}) with n >= 1, got {x.shape}.")
        return x
