"""N-particle solver for self-attention dynamics on S^{d-1} (SPEC §2–§3, L4) and in R^d (§11.2).

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
  the authors' Euler-then-normalise step (``scheme="euler-normalize"``, SPEC §1.2), and for
  noise ν > 0 the Euler–Maruyama step of the projected Stratonovich SDE (SPEC L4)
  x ← N(x + h X(x) + sqrt(2νh) P_x ξ), ξ ~ N(0, I_d), N(y) = y/|y|; the normalisation supplies
  the Itô drift −ν(d−1)x h in expectation (|x + s P_xξ|² = 1 + 2νh|P_xξ|², E|P_xξ|² = d − 1),
  so the law solves the Fokker–Planck equation of L3 (weak order 1; for pure noise one step maps
  E⟨x, x0⟩ to r(h)E⟨x, x0⟩ exactly, r(h) = E(1 + 2νhχ²_{d−1})^{−1/2} = 1 − ν(d−1)h + O(h²)).
"""
import numpy as np
from scipy.linalg import expm

from meanfield._checks import check_int, check_points, check_real, check_times, check_weights
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
    model : `meanfield.Model` (any dim, any heads; noise ν adds sqrt(2ν)·P_x∘dB, SPEC L4).
    chunk : int >= 1
        Block size of the pairwise sums (memory O(n·d + chunk²) per realisation).
    diagnostics : "auto" | "full" | "none"
        What is recorded at each saved time besides the energy: "auto" records the clustered-pair
        fraction and the number of clusters at tolerance ``delta`` when n <= 4096, and W1 to the
        nearest Dirac mass for a single realisation with n <= 1024; "full" always records all
        three (O(n²) per saved time and a loop over realisations for W1); "none" nothing.
    delta : float in (0, 2]
        Tolerance δ of the cluster diagnostics (⟨x_i, x_j⟩ >= 1 − δ), default 1e-3 (Figure 3).
    """

    name = "particles"

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
        # solve-time settings (defaults for `velocity`)
        self._weights = None
        self._domain = "sphere"
        self._rescaled = False
        self._log_time_factor = 0.0

    # -- the vector field ------------------------------------------------------------------------
    def _shift_kind(self, head, x):
        """'none', 'fixed' (c = β, zonal) or 'running' (log-sum-exp) for this head and state."""
        beta = self.model.beta
        if self._domain == "sphere":
            if beta * head["norm"] <= _NO_SHIFT_MAX:
                return "none"
            return "fixed" if head["M"] is None else "running"
        r2 = float(np.max(np.einsum("...d,...d->...", x, x)))
        return "none" if beta * head["norm"] * r2 <= _NO_SHIFT_MAX else "running"

    def _attention_sums(self, x, head, w, beta):
        """S_i = Σ_j w_j e^{β⟨x_i, M x_j⟩ − c_i} [V x_j, 1] and the shift c_i (0-d if fixed), in blocks."""
        M, V = head["M"], head["V"]
        n, d = x.shape[-2:]
        xq = x if M is None else x @ M                     # row i: (M^T x_i)^T, so xq_i · x_j = ⟨x_i, M x_j⟩
        if beta != 1.0:
            xq = beta * xq
        vals = x * head["v"] if head["v"] is not None else x @ V.T
        rhs = np.empty(x.shape[:-1] + (d + 1,))
        np.multiply(vals, w[:, None], out=rhs[..., :d])
        rhs[..., d] = w
        xt = np.ascontiguousarray(np.swapaxes(x, -1, -2))
        kind = self._shift_kind(head, x)
        lead = x.shape[:-2]
        bs = min(self.chunk, n)
        if bs == n and kind != "running" and int(np.prod(lead)) * n * n <= 4 * self.chunk ** 2:
            # one block (small clouds, possibly many realisations): no accumulation
            L = xq @ xt
            if kind == "fixed":
                L -= beta
            np.exp(L, out=L)
            return L @ rhs, np.float64(beta if kind == "fixed" else 0.0)
        if lead and int(np.prod(lead)) > 1 and int(np.prod(lead)) * bs * bs > 4 * self.chunk ** 2:
            # many realisations of a large cloud: slice the batch to keep memory O(chunk²)
            xf, wf = x.reshape((-1, n, d)), w
            per = max(1, 4 * self.chunk ** 2 // (bs * bs))
            parts = [self._attention_sums(xf[s:s + per], head, wf, beta) for s in range(0, xf.shape[0], per)]
            acc = np.concatenate([p[0] for p in parts]).reshape(lead + (n, d + 1))
            if kind == "running":
                return acc, np.concatenate([p[1] for p in parts]).reshape(lead + (n,))
            return acc, parts[0][1]
        acc = np.zeros(lead + (n, d + 1))
        c = np.zeros(lead + (n,)) if kind == "running" else np.float64(beta if kind == "fixed" else 0.0)
        if kind == "running":
            c[...] = -np.inf
        blocks = [(s, min(s + bs, n)) for s in range(0, n, bs)]
        for a, b in blocks:
            for a2, b2 in blocks:
                L = xq[..., a:b, :] @ xt[..., :, a2:b2]
                if kind == "fixed":
                    L -= beta
                elif kind == "running":
                    m_new = np.maximum(c[..., a:b], L.max(axis=-1))
                    with np.errstate(invalid="ignore"):
                        acc[..., a:b, :] *= np.exp(c[..., a:b] - m_new)[..., None]
                    c[..., a:b] = m_new
                    L -= m_new[..., None]
                np.exp(L, out=L)
                acc[..., a:b, :] += L @ rhs[..., a2:b2, :]
        return acc, c

    def _field(self, x, w, project):
        """Σ_h (attention output) at the particles x, projected onto the tangent spaces if asked."""
        beta = self.model.beta
        out = None
        for head in self._heads:
            acc, c = self._attention_sums(x, head, w, beta)
            d = x.shape[-1]
            if self.model.normalized:
                y = acc[..., :d] / acc[..., d:]
            else:
                scale = np.exp(np.asarray(c) - self._log_time_factor)
                y = acc[..., :d] * (scale[..., None] if np.ndim(scale) else scale)
            out = y if out is None else out + y
        if project:
            out = out - np.einsum("...d,...d->...", x, out)[..., None] * x
        return out

    def velocity(self, x, weights=None, *, rescale_time=False):
        """X[μ](x_i) at the particles (SPEC (2.3)/(2.7)/(3.2), L4): x (n, d) or (B, n, d) on the sphere.

        ``weights`` (n,) default 1/n. With ``rescale_time=True`` ((USA) only) returns e^{−β}X, the
        velocity in τ = e^β t (finite for every β).
        """
        saved = self._domain, self._log_time_factor
        self._domain = "sphere"
        self._log_time_factor = self.model.beta if (rescale_time and not self.model.normalized) else 0.0
        try:
            x = self._check_x(x, normalize=False)
            w = check_weights(weights, x.shape[-2])
            return self._field(x, w, project=True)
        finally:
            self._domain, self._log_time_factor = saved

    def _rhs(self, t, y):
        w = self._weights
        if self._domain == "sphere":
            return self._field(y, w, project=True)
        if not self._rescaled:
            return self._field(y, w, project=False)
        # rescaled form (9.2)–(9.3): x = e^{tV} z, ż_i = −V z_i + e^{−tV} Σ_j A_ij V x_j
        E = expm(t * self._V)
        x = y @ E.T
        f = self._field(x, w, project=False)
        return -(y @ self._V.T) + f @ np.linalg.inv(E).T

    # -- Solver contract -------------------------------------------------------------------------
    def _representation(self):
        return ParticleCloud(self._weights, self.model.dim, domain=self._domain)

    def _retract(self, y):
        return y / np.linalg.norm(y, axis=-1, keepdims=True)

    def _diagnostics(self, t, y):
        level = self.diagnostics_level
        out = {}
        if level == "none" or self._domain != "sphere":
            return out
        n = y.shape[-2]
        if level == "full" or n <= 4096:
            out["clustered_fraction"] = clustered_pair_fraction(y, self.delta, chunk=self.chunk)
            out["clusters"] = count_clusters(y, self.delta, chunk=self.chunk)
        if level == "full" or (y.ndim == 2 and n <= 1024):
            out["w1_to_dirac"] = w1_to_nearest_dirac(y, self._weights)
        return out

    def _check_x(self, x0, normalize):
        d = self.model.dim
        name = "x0"
        if self._domain == "sphere":
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

    # -- the driver ------------------------------------------------------------------------------
    def solve(self, x0, t_eval, weights=None, rng=None, *, normalize=False, scheme="adaptive", dt=None,
              rtol=1e-8, atol=1e-10, method="dopri5", progress=None, checkpoint=None, checkpoint_every=30.0,
              max_step=np.inf, first_step=None, domain="sphere", rescaled=False, rescale_time=False):
        """Evolve particles x0 and save at ``t_eval``.

        Parameters
        ----------
        x0 : (n, d) or (B, n, d) array
            Initial positions (B independent realisations share the weights and are computed in one
            vectorised evaluation). On the sphere they must be unit vectors within 1e-10 unless
            ``normalize=True``.
        t_eval : 1-D array, strictly increasing, starting at 0.
        weights : (n,) non-negative, summing to 1 (default 1/n); rescaled if ``normalize=True``.
        rng : seed or numpy Generator for the noise (model.noise > 0).
        scheme : "adaptive" (default: dopri5/bs32 with error control and retraction; with noise the
            Euler–Maruyama step of SPEC L4 with step ``dt``) or "euler-normalize" (the authors'
            x ← N(x + dt·Σ_h A_h V_h x), no projection before normalising, SPEC §1.2).
        dt : step of the fixed-step schemes (default 0.1 for euler-normalize, 0.01 with noise).
        rtol, atol, method, progress, checkpoint, checkpoint_every, max_step, first_step : see
            `solvers.Solver.solve`.
        domain : "sphere" (default) or "euclidean": the R^d dynamics ẋ_i = Σ_j P_ij V x_j without
            projection or normalisation (§11.2, [003] (1)–(2); β multiplies ⟨Qx, Ky⟩).
        rescaled : with domain="euclidean" and one head: integrate z_i = e^{−tV} x_i, which solves
            (9.2)–(9.3) / [003] (4); the saved positions are then z.
        rescale_time : (USA) integrate in τ = e^β t (velocity e^{−β}X^U, exact): ``t_eval`` and
            ``sol.t`` are then values of τ. Required for β > 690 on the sphere.

        Returns
        -------
        Solution with a `ParticleCloud`: ``positions`` (T, n, d) or (T, B, n, d), ``weights``,
        ``energy`` (T,) or (T, B), and ``diagnostics`` (see the class docstring). Failures
        (NaN/inf) raise `NonFiniteState` naming t and the step, with ``.solution``.
        """
        if domain not in ("sphere", "euclidean"):
            raise ValueError(f"`domain` must be 'sphere' or 'euclidean', got {domain!r}.")
        if scheme not in ("adaptive", "euler-normalize"):
            raise ValueError(f"`scheme` must be 'adaptive' or 'euler-normalize', got {scheme!r}.")
        if not isinstance(rescaled, (bool, np.bool_)):
            raise ValueError(f"`rescaled` must be True or False, got {rescaled!r}.")
        if rescaled and domain != "euclidean":
            raise ValueError("`rescaled=True` (z = e^{-tV} x, (9.2)-(9.3)) needs domain='euclidean'.")
        if rescaled and len(self.model.heads) != 1:
            raise UnsupportedModel("`rescaled=True` needs a single head (one value matrix V).")
        if rescaled and scheme != "adaptive":
            raise ValueError("`rescaled=True` is only available with scheme='adaptive'.")
        self._domain = domain
        self._rescaled = bool(rescaled)
        self._V = self.model.V
        beta = self.model.beta
        if rescale_time:
            if self.model.normalized:
                raise ValueError("`rescale_time=True` is for (USA) only (normalized=False); (SA) velocities are bounded.")
            self._log_time_factor = beta
        else:
            self._log_time_factor = 0.0
            if (not self.model.normalized and domain == "sphere"
                    and beta * max(h["norm"] for h in self._heads) > _EXP_MAX):
                raise ValueError(f"(USA) with `beta`={beta:g}: the velocity is of size e^beta, beyond float64 for "
                                 f"beta > {_EXP_MAX:g}. Pass rescale_time=True to integrate in tau = e^beta t.")
        t_eval = check_times(t_eval)
        x = self._check_x(x0, normalize)
        n = x.shape[-2]
        self._weights = check_weights(weights, n, normalize=normalize)
        noise = self.model.noise
        if dt is not None:
            dt = check_real(dt, "dt", low=0.0, low_open=True)
        opts = dict(rtol=rtol, atol=atol, method=method, progress=progress, checkpoint=checkpoint,
                    checkpoint_every=checkpoint_every, max_step=max_step, first_step=first_step)
        if noise == 0.0 and scheme == "adaptive":
            self._has_retract = domain == "sphere"
            return self._run(x, t_eval, **opts)
        if rescaled:
            raise ValueError("`rescaled=True` is not available with noise.")
        if dt is None:
            dt = 0.1 if noise == 0.0 else 0.01
        gen = np.random.default_rng(rng)
        step = self._make_step(scheme, noise, gen)
        return self._run(x, t_eval, fixed_step=step, dt=dt, **opts)

    def _make_step(self, scheme, noise, gen):
        """One fixed step y ← N(y + h·F(y) + sqrt(2νh)·P_y ξ) (sphere) or its R^d analogue."""
        sphere = self._domain == "sphere"
        project = scheme == "adaptive" and sphere   # euler-normalize: the authors' unprojected update
        w = self._weights
        amp = np.sqrt(2.0 * noise)

        def step(t, y, h):
            with np.errstate(over="ignore", invalid="ignore"):   # non-finite states are reported by the driver
                y_new = y + h * self._field(y, w, project=project)
            if noise > 0.0:
                xi = gen.standard_normal(y.shape)
                if sphere:
                    xi -= np.einsum("...d,...d->...", y, xi)[..., None] * y
                y_new += amp * np.sqrt(h) * xi
            return self._retract(y_new) if sphere else y_new

        return step
