"""N-particle solver for self-attention dynamics on S^{d-1} ((2.3)–(2.7), (3.2); docs/mathematics.md §1) and in R^d (Section 9.2; the companion paper).

The vector field of weighted particles μ = Σ_j w_j δ_{x_j} (Σ w_j = 1), for heads h = 1..H
(one head unless the model has ``heads``), M_h = Q_hᵀK_h:

    (SA)   X_i = P_{x_i} Σ_h Σ_j w_j e^{β⟨x_i, M_h x_j⟩} V_h x_j / Σ_j w_j e^{β⟨x_i, M_h x_j⟩}   (2.3), (2.7), (3.2)
    (USA)  X_i = P_{x_i} Σ_h Σ_j w_j e^{β⟨x_i, M_h x_j⟩} V_h x_j                            (USA), (3.8)

with P_x y = y − ⟨x, y⟩x. Equal weights w_j = 1/n give (SA) and (USA) exactly. A masked model
(``mask="causal"`` or ``"causal-strict"``, ALiBi slope ``position_bias``) takes the particles as tokens
in order and sums over j ∈ C(i) with the weights w_j e^{−λ(σ_i − σ_j)}, (USA) divided by their sum
(`meanfield.transformer.masks`, docs/causal.md). Numerics:

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
from dataclasses import dataclass

import numpy as np
from scipy.linalg import expm

from meanfield.sums import compiled
from meanfield.validation import (NORMALIZE_POINTS, NORMALIZE_WEIGHTS, check_int, check_memory, check_points, check_real,
                               check_weights)
from meanfield.observables.diagnostics import (cluster_sizes, clustered_pair_fraction, count_clusters, span_dimension,
                                   w1_to_nearest_dirac)
from meanfield.observables.energy import discrete_energy, energy_from_scaled_sum
from meanfield.errors import InvalidInput, UnsupportedModel
from meanfield.transformer.feedforward import FeedForward, check_mlp
from meanfield.sums.kernelsums import attention_sums, gram_counts, kernel_sums
from meanfield.sums.sinkhorn import biased_sums, l2_bias, sinkhorn, sinkhorn_energy, sinkhorn_output
from meanfield.threads import check_threads
from meanfield.transformer.masks import model_mask
from meanfield.transformer.normalization import carries_radius, check_radii, direction_velocity, inverse_speed, position_velocity
from meanfield.representations.particles import ParticleCloud
from meanfield.transformer.schedule import Schedule
from meanfield.representations.sampled_particles import SampledParticleCloud, saved_slice
from meanfield.sums.spectralsums import EPSILON, causal_zonal_sums, check_sums, choose_sums, zonal_sums

from .base import Run, Solver
from .bases import ResolutionPolicy

_NO_SHIFT_MAX = 300.0      # |β⟨x, M y⟩| below this: e^L needs no shift
_EXP_MAX = 690.0           # e^c representable with room for the bounded factor
_EYE_TOL = 1e-14
FULL = ("energy", "clustered_fraction", "clusters", "w1_to_dirac")
DIAGNOSTICS = FULL + ("span_dimension", "cluster_sizes")      # the last two only when named
SAVE = ("auto", "positions", "ends", "diagnostics")
RUN_MLP = ("mlp_W", "mlp_U", "mlp_b")    # Solution.stats keys of the feed-forward term given to solve
NORMALISED = ("l2", "sinkhorn")    # the attentions of `meanfield.sums.sinkhorn` (docs/attention.md)
AUTO_SAVE_BYTES = 1 << 28  # save="auto" keeps every position up to 256 MB of them, else the first and last


def point_norms(y):
    """|y_i| (..., n, 1): the size of each point, what ``rtol`` is relative to in the adaptive error
    control (one scale per point, so the control is invariant under rotations of R^d)."""
    return np.sqrt(np.einsum("...d,...d->...", y, y))[..., None]


class Layers(Schedule):
    """Layers that differ (Section 1 of the paper: the parameters of the continuous-time model may depend
    on t): the `meanfield.Schedule` whose piece k sets the heads ``layers[k]`` (a list of (Q, K, V), each
    possibly with a leading realisation axis) on [kT, (k + 1)T), the last one from then on. Pass it as
    ``Particles.solve(..., parameters=Layers(layers, T))``: no step crosses a kT, so each layer acts for
    exactly T. ``Layers(layers, T)(t)`` is the layer of t."""

    def __init__(self, layers, period):
        self.layers = list(layers)
        if not self.layers:
            raise InvalidInput("`layers` must hold at least one list of (Q, K, V) heads.")
        self.period = check_real(period, "period", low=0.0, low_open=True)
        super().__init__(self.period * np.arange(len(self.layers)), [{"heads": heads} for heads in self.layers])

    def __call__(self, t):
        return self.layers[self.index(t)]


@dataclass(eq=False, slots=True)
class ParticlesRun(Run):
    """The per-run values of a `Particles` run (`Particles._configure` and the initial state set them)."""

    domain: str = "sphere"            # "sphere" (S^{d-1}) or "euclidean" (R^d)
    rescaled: bool = False            # integrate z = e^{-tV} x ((9.2)-(9.3))
    log_time_factor: float = 0.0      # β in time τ = e^β t ((USA), ``rescale_time``), else 0
    adaptive: bool = False            # an adaptive pair: the field normalises its argument
    diagnostics_level: object = "auto"   # "auto" | "full" | "none" | a frozenset of DIAGNOSTICS
    save: object = "auto"             # the checked ``save``: one of SAVE or a mask over t_eval
    weights: np.ndarray = None        # (n,), summing to 1
    batch: int = None                 # B realisations, or None for one
    kept: np.ndarray = None           # mask of the saved times whose positions are kept; None: all
    sums: str = "direct"              # the kernel sums: "direct" or "spectral"
    sums_error_bound: float = 0.0     # the spectral sums' bound of the field's relative error
    parameters: object = None         # the run's heads (a list or a callable of t), None: the model's
    heads: list = None                # the prepared heads of constant ``parameters``
    causal: object = None             # the `meanfield.transformer.masks.TokenMask` of a masked model, else None
    radii: np.ndarray = None          # (..., n, 1) the radii of a scheme that keeps them fixed
    radial: bool = False              # the state is x = rθ in R^d: the radii move ("pre", "mix", "peri")
    feedforward: object = None        # the run's `meanfield.transformer.feedforward.FeedForward` (``mlp``), else the model's


class Particles(Solver):
    """Weighted particles on S^{d-1} (or in R^d) under (SA)/(USA), general Q, K, V, multi-head.

    Parameters
    ----------
    model : `meanfield.Model` (any dim, any heads; noise ν adds sqrt(2ν)·P_x∘dB, docs/mathematics.md §6).
    chunk : int >= 1
        Block size of the pairwise sums (memory O(n·d + chunk²) per realisation).
    diagnostics : "auto" | "full" | "none" | a sequence of names among DIAGNOSTICS
        What is recorded at each saved time (``solve(..., diagnostics=...)`` overrides it for one
        run): "auto" records the energy E_β (3.5) (for one head with QᵀK = I, or when positions are
        not all kept), the clustered-pair fraction and the number of clusters when n <= 4096, and W1
        to the nearest Dirac mass for a single realisation with n <= 1024; "full" all four (O(n²)
        per saved time and a loop over realisations for W1); "none" nothing; or the names wanted,
        e.g. ``("energy", "clustered_fraction")``, which may also name "span_dimension" (the number of
        Gram eigenvalues above 1e-3, `meanfield.observables.diagnostics.span_dimension`) and "cluster_sizes"
        (clusters of each size at ``cluster_delta``, (n,) per realisation,
        `meanfield.observables.diagnostics.cluster_sizes`).
    delta : float in (0, 2]
        Tolerance δ of the clustered-pair fraction (⟨x_i, x_j⟩ >= 1 − δ), default 1e-3 (Figure 3).
    cluster_delta : float in (0, 2], default ``delta``
        Tolerance of the number of clusters (i ~ j when ⟨x_i, x_j⟩ >= 1 − cluster_delta).
    sums : "auto" | "direct" | "spectral"
        How the kernel sums Σ_j w_j e^{β⟨x_i, x_j⟩}[x_j, 1] are formed: "direct" (n² exponentials,
        `meanfield.sums.kernelsums`, exact to rounding), "spectral" (zonal models on S^1 and S^2: the
        kernel's Fourier / spherical-harmonic expansion through ducc0's nonuniform transforms,
        O(n + L² log L), `meanfield.sums.spectralsums`; the field's relative error at particle i is at
        most about ε/max(w_i, e^{−2β}), ε = 3e-13), or "auto": spectral where it applies, is faster (n >= a few
        hundred, `meanfield.sums.spectralsums.crossover`) and its bound is at most ``sums_tol``. The
        choice and the bound are in ``sol.stats`` (``sums``, ``sums_error_bound``).
    sums_tol : float > 0, the largest error bound "auto" accepts for the spectral sums (default 1e-6).
    {threads}

    Raises
    ------
    ValueError
        ``model`` not a `meanfield.Model`, bad ``chunk``, ``diagnostics``, ``delta``, ``sums`` or
        ``sums_tol``; at ``solve``, points off the sphere, weights that are negative or do not sum to
        1, an option that does not apply to the method.

    Notes
    -----
    Saved times cost less than a step: the energy and the clustered pairs at a state come from the
    blocks of the kernel sums of the field at that state (Σ_j w_j e^{β⟨x_i, x_j⟩} is the
    denominator of (SA)), and that evaluation is kept for the step that starts there (euler steps,
    and the adaptive steps' first stage). Only the number of clusters and W1 cost extra.

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

    A masked model (``Model(mask=..., position_bias=λ)``, docs/causal.md): x0[j] is token j + 1
    at the position σ = (j + 1)/n, or at ``token_positions`` (n,) in (0, 1], non-decreasing; C(i) = {j : σ_j <= σ_i}
    ("causal") or σ_j < σ_i ("causal-strict"), the pair weight w_j e^{−λ(σ_i − σ_j)} (`meanfield.transformer.masks`).
    A token with no weight in C(i) does not move. The sums run over the triangle only, and the spectral
    ones by blocks of positions (`meanfield.sums.spectralsums.causal_zonal_sums`, bound
    `masked_error_bound`). The recorded energy is (3.5) of the configuration, without the mask. Heads
    may carry their own slopes (``Model(heads=..., position_bias=[λ_1, ...])``): head h sums with its own
    ALiBi weights and normaliser, in the direct sums and, for zonal heads of their own β
    (`meanfield.Model.head_models`), in the spectral ones.

    ``parameters`` replaces the model's heads for one run (the model's β, (SA)/(USA) and noise stay):
    a list of (Q, K, V) heads, Q, K of shape (m, d) and V (d, d) (None: the identity; a scalar V:
    V·I), each possibly with a leading axis of one matrix per realisation, (B, m, d) / (B, d, d) for
    x0 of shape (B, n, d): the B realisations, each with its own parameters, are still one
    vectorised evaluation (the kernel sums take the stack M_b = Q_bᵀK_b); or a callable t -> such
    a list, for time-dependent parameters, called at the start of every step (and at every stage of
    the adaptive pairs); or a `meanfield.Schedule` whose pieces set ``heads``, e.g. `Layers`
    (piecewise constant: layers that differ), whose breakpoints no step crosses. Its results are
    checked once per distinct object returned (per piece for a Schedule). A model with a schedule
    (``Model(schedule=...)``, docs/schedule.md) changes β, the heads and the MLP at its breakpoints. The energy of the Solution is that of (3.5) (the
    identity interaction), as for any non-zonal model.

    ``save`` chooses what each saved time keeps besides its diagnostics: "positions" (all),
    "ends" (the first and last saved times), "diagnostics" (none), or a list of saved times;
    "auto" (default) is "positions" while they take at most AUTO_SAVE_BYTES (256 MB), else "ends".
    Without every position the Solution is a `SampledParticleCloud`: ``sol.energy`` and
    ``sol.diagnostics`` hold every saved time, ``sol.positions`` raises AttributeError naming the
    kept times, ``sol[i].positions`` and ``sol.measure(i)`` work at those. ``threads`` (the
    constructor's, `meanfield.threads`; ``solve(..., threads=)`` for one run) share out the blocks of the
    kernel sums and ducc0's transforms; the result does not depend on it. With ``dense_output=True`` the adaptive steps are not cut at the saved times,
    which come from the pair's interpolant (retracted onto the sphere).

    Where the normalisation sits (``Model(normalization=...)``, `meanfield.transformer.normalization`,
    docs/normalization.md): the direction θ_j moves by s_j⁻¹ P_θ A_j and the radius r_j by its own
    law. ``radii`` (n,) or (B, n), default 1, are the initial token norms; ``sol.radii`` reports them
    at each saved time (the diagnostic "radii", saved in files and continued by a restart) and
    ``sol.positions`` holds the directions. "pre", "mix" and "peri" integrate x = rθ in R^d (no
    retraction; euler-normalize is then plain Euler); "ngpt" and "sqrt-depth" keep the directions on
    the sphere (euler-normalize: θ ← N(θ + h s⁻¹A)). Sphere only, no noise.

    A feed-forward term (``Model(mlp=(W, U, b), activation=...)``, `meanfield.transformer.feedforward`) adds
    F(x) = W act(Ux + b) to the attention output Σ_h A_h at each token, on any domain, with masks,
    batches and heads: on the sphere the particle moves by P_x(A + F) (Post-LN), in R^d by A + F, and
    under a normalisation scheme A + F (F at the direction θ) takes the place of A before the
    scheme's speed s⁻¹. Noise adds to it as without the MLP. ``mlp=(W, U, b)`` replaces the model's
    term for one run (with the model's ``activation``), each array possibly with a leading axis of one
    MLP per realisation of x0 (B, d, w), (B, w, d), (B, w).

    Examples
    --------
    32 tokens on S^2 at β = 4: the energy E_β (3.5) increases and the tokens gather into clusters
    (the adaptive pair keeps them on the sphere to rounding):

    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> x0, _ = mf.sample(mf.densities.uniform(), 32, 3, rng=1)
    >>> sol = solvers.Particles(mf.Model(beta=4.0, dim=3)).solve(x0, [0.0, 5.0, 10.0], progress=False)
    >>> sol.positions.shape, np.round(sol.energy, 4).tolist()
    ((3, 32, 3), [0.9626, 2.0286, 2.4654])
    >>> sol.diagnostics["clusters"].tolist()
    [32, 17, 3]
    >>> bool(np.allclose(np.linalg.norm(sol.positions, axis=-1), 1.0, atol=1e-12))
    True

    The authors' scheme (explicit Euler, then renormalisation) for comparison:

    >>> ref = solvers.Particles(mf.Model(beta=4.0, dim=3)).solve(x0, [0.0, 5.0, 10.0], scheme="euler-normalize",
    ...                                                          dt=0.1, progress=False)
    >>> np.round(ref.energy, 4).tolist()
    [0.9626, 1.8758, 2.4651]
    """

    steppers = ("dopri5", "bs32", "euler-maruyama", "euler-normalize")
    policy = ResolutionPolicy("n", low=1)      # the number of particles of the initial state
    method_options = ("scheme",)
    config_name = "particles"
    solve_options = {"weights": None, "rng": None, "domain": "sphere", "rescaled": False, "rescale_time": False,
                     "save": "auto", "diagnostics": None, "threads": None, "parameters": None, "token_positions": None,
                     "radii": None, "mlp": None}
    positional_options = ("weights", "rng")
    retracts = True
    retract_invariant = True       # the adaptive field normalises its argument: the last stage is reused
    run_type = ParticlesRun
    mass_by_construction = True     # the weights do not change: a report notes the mass
    takes_mask = True              # causal masks with the ALiBi bias (meanfield.transformer.masks)
    normalizations = ("post", "pre", "mix", "peri", "ngpt", "sqrt-depth")
    takes_mlp = True               # the feed-forward term, added to the attention output (meanfield.transformer.feedforward)
    takes_schedule = True          # parameters that change with depth (meanfield.transformer.schedule)
    attentions = ("softmax", "sinkhorn", "l2")     # docs/attention.md

    @classmethod
    def examples(cls):
        """Small runs (`solvers.Solver.examples`): without and with noise."""
        from meanfield.transformer.model import Model

        def cloud(n, seed):
            x = np.random.default_rng(seed).standard_normal((n, 3))
            return x / np.linalg.norm(x, axis=-1, keepdims=True)

        return {"Particles": (lambda: cls(Model(beta=2.0, dim=3)), [cloud(40, 1), cloud(40, 2)], {}),
                "Particles-noise": (lambda: cls(Model(beta=2.0, dim=3, noise=0.1)), [cloud(30, 3), cloud(30, 4)],
                                    {"rng": 7})}

    def __init__(self, model, *, chunk=512, diagnostics="auto", delta=1e-3, cluster_delta=None, sums="auto",
                 sums_tol=1e-6, threads=None):
        super().__init__(model, threads)
        if model.attention in NORMALISED and not model.normalized:
            raise UnsupportedModel(f"`attention`={model.attention!r} normalises the attention weights; it has no "
                                   "(USA) form: pass normalized=True (docs/attention.md).")
        self.sums = check_sums(sums, model, heads=True)
        self.sums_tol = check_real(sums_tol, "sums_tol", low=0.0, low_open=True)
        self.chunk = check_int(chunk, "chunk", low=1)
        check_memory(32 * self.chunk ** 2, "chunk", self.chunk)
        self.diagnostics_level = self._check_diagnostics(diagnostics)
        self.delta = check_real(delta, "delta", low=0.0, low_open=True, high=2.0)
        self.cluster_delta = self.delta if cluster_delta is None else check_real(
            cluster_delta, "cluster_delta", low=0.0, low_open=True, high=2.0)
        self._heads = self._prepare_heads(model.heads)

    def _prepare_heads(self, heads, batch=None):
        """The heads as the field uses them: [{"M": QᵀK or None for I, "Vt": Vᵀ (contiguous), "v": the
        scalar of V = v·I or None, "norm": ‖M‖₂ (the largest over realisations), "KtK": KᵀK or None for I
        (L2 attention's column term)}]. Each Q, K (m, d) and
        V (d, d) may carry a leading realisation axis of length ``batch`` (per-realisation parameters);
        Q or K None is I, a scalar V is V·I. Checked here: ValueError naming `parameters`."""
        d, out = self.model.dim, []
        try:
            heads = list(heads)
        except TypeError:
            raise InvalidInput("`parameters` must be a list of (Q, K, V) heads or a callable t -> such a list, "
                             f"got {type(heads).__name__}.") from None
        if not heads:
            raise InvalidInput("`parameters` must hold at least one (Q, K, V) head.")
        for k, head in enumerate(heads):
            try:
                Q, K, V = (None if a is None else np.asarray(a, dtype=float) for a in head)
            except (TypeError, ValueError):
                raise InvalidInput(f"`parameters[{k}]` must be a triple (Q, K, V) of real arrays "
                                 "(None: identity).") from None
            if V is None:
                V = np.float64(1.0)
            for name, a in (("Q", Q), ("K", K), ("V", V)):
                if a is None or a.ndim == 0:
                    continue
                lead = a.shape[:-2]
                if (a.ndim not in (2, 3) or a.shape[-1] != d or (name == "V" and a.shape[-2] != d)
                        or (lead and (batch is None or lead[0] != batch)) or not np.all(np.isfinite(a))):
                    raise InvalidInput(f"`parameters[{k}]`: {name} must be a finite ({'d' if name == 'V' else 'm'}, "
                                     f"{d}) array, or ({batch}, ..., {d}) with one per realisation of `x0`, "
                                     f"got shape {a.shape}.")
            if V.ndim == 0:
                V = float(V) * np.eye(d)
            if Q is not None and K is not None and Q.shape[-2] != K.shape[-2]:
                raise InvalidInput(f"`parameters[{k}]`: Q and K must have the same number of rows m, got "
                                 f"{Q.shape} and {K.shape}.")
            if Q is None and K is None:
                M = None
            else:
                Qt = np.eye(d) if Q is None else np.swapaxes(Q, -1, -2)
                M = Qt @ (np.eye(d) if K is None else K)
                if M.ndim == 2 and np.allclose(M, np.eye(d), rtol=0, atol=_EYE_TOL):
                    M = None
            v = float(V.flat[0])
            scalar_v = bool(np.allclose(V, v * np.eye(d), rtol=0, atol=_EYE_TOL))
            norm = 1.0 if M is None else float(np.max(np.linalg.norm(M, 2, axis=(-2, -1))))
            KtK = None if K is None else np.swapaxes(K, -1, -2) @ K
            if KtK is not None and KtK.ndim == 2 and np.allclose(KtK, np.eye(d), rtol=0, atol=_EYE_TOL):
                KtK = None
            out.append({"M": M, "Vt": np.ascontiguousarray(np.swapaxes(V, -1, -2)),
                        "v": v if scalar_v else None, "norm": norm, "KtK": KtK})
        return out

    def _heads_at(self, run, t):
        """The prepared heads of the step or saved time at t: the model's, or the run's ``parameters``
        (a list, or a callable of t, whose result is prepared once per distinct object it returns)."""
        if run is None or run.parameters is None:
            return self._heads
        if not callable(run.parameters) or isinstance(run.parameters, Schedule):
            return run.heads                     # constant, or the piece's (`_enter_piece`)
        heads = run.parameters(t)
        cached = run.workspace.get("parameters")
        if cached is None or cached[0] is not heads:
            run.workspace["parameters"] = cached = (heads, self._checked_parameters(run, heads))
        return cached[1]

    def _usa_overflows(self, heads, domain, log_time_factor):
        """(USA) on the sphere in time t: the velocity, of size e^{|β|·‖QᵀK‖₂}, is beyond float64."""
        return (not self.model.normalized and domain == "sphere" and not log_time_factor
                and abs(self.model.beta) * max(h["norm"] for h in heads) > _EXP_MAX)

    def _checked_parameters(self, run, heads):
        prepared = self._prepare_heads(heads, run.batch)
        if isinstance(self.model.position_bias, tuple) and len(prepared) != len(self.model.heads):
            raise InvalidInput(f"`parameters` must hold {len(self.model.heads)} heads, one per ALiBi slope of the model "
                             f"(position_bias={list(self.model.position_bias)}), got {len(prepared)}.")
        if self._usa_overflows(prepared, run.domain, run.log_time_factor):
            raise InvalidInput("`parameters`: (USA) velocities of size e^(beta |QᵀK|) beyond float64; pass "
                             "rescale_time=True.")
        return prepared

    # -- the vector field ------------------------------------------------------------------------
    def _shift_kind(self, head, x, domain):
        """'none', 'fixed' (c = β, zonal, β > 0) or 'running' (log-sum-exp) for this head and state."""
        beta = self.model.beta
        if domain == "sphere":
            if abs(beta) * head["norm"] <= _NO_SHIFT_MAX:
                return "none"
            return "fixed" if head["M"] is None and beta > 0 else "running"
        r2 = float(np.max(np.einsum("...d,...d->...", x, x)))
        return "none" if abs(beta) * head["norm"] * r2 <= _NO_SHIFT_MAX else "running"

    def _attention_sums(self, x, head, w, domain, threads=None, count_at=None, causal=None, targets=None):
        """S_i = Σ_j w_j e^{β⟨x_i, M x_j⟩ − c_i} [V x_j, 1] and the shift c_i (0-d if fixed), in blocks
        of the shared kernel-sum engine (with the counts of ⟨x_i, M x_j⟩ >= count_at if given); under a
        ``causal`` mask (`meanfield.transformer.masks.TokenMask`) over j ∈ C(i), the exponent with −λ(σ_i − σ_j).
        The rows are the points ``targets`` (tracers) instead of the particles when given."""
        M, v = head["M"], head["v"]
        z = x if targets is None else targets
        options = dict(M=M, shift=self._shift_kind(head, x, domain), chunk=self.chunk, threads=threads,
                       count_at=count_at, unit=domain == "sphere")
        if causal is not None:
            options.update(ends=causal.ends, bias=causal.bias)
            if causal.depth < -_NO_SHIFT_MAX:
                options["shift"] = "running"    # rows whose every term is tiny (a steep slope): each its own shift
        if v is None:                           # x_j ↦ V x_j, per realisation when V is (B, d, d)
            return kernel_sums(z, x, compiled.weighted(x @ head["Vt"], w), self.model.beta, **options)
        return attention_sums(z, x, w, self.model.beta, v=None if v == 1.0 else v, **options)

    def _energy_head(self, domain, heads=None):
        """Whether the denominators Σ_j w_j e^{β⟨x_i, x_j⟩} of the field give the energy (3.5) (not
        under a mask: they are then sums over C(i))."""
        heads = self._heads if heads is None else heads
        return (domain == "sphere" and len(heads) == 1 and heads[0]["M"] is None and not self.model.is_causal
                and self.model.attention == "softmax")

    def _evaluate(self, run, x, w, domain="sphere", log_time_factor=0.0, count=False, heads=None, causal=None,
                  targets=None):
        """The unprojected Σ_h (attention output) at the particles x, with what the same sums give:
        {"x", "out", "den" (Σ_j w_j e^{β⟨x_i, x_j⟩ − c}, when it is the kernel of the energy), "c",
        "counts" (per row, the j with ⟨x_i, x_j⟩ >= 1 − δ, i = j included, if ``count``; else None),
        "heads" (the prepared heads used: ``heads``, default the model's)}. A masked model sums over
        C(i) (the run's, or ``causal`` without a run; `meanfield.transformer.masks`). With ``targets`` (unmasked), the
        output at those points (tracers) instead of at the particles, from the same sums."""
        causal = run.causal if run is not None else causal
        if run is not None and run.sums == "spectral":
            hit = self._evaluate_spectral(x, w, run.threads, log_time_factor, causal, targets)
        else:
            hit = self._evaluate_direct(run, x, w, domain, log_time_factor, count, heads, causal, targets)
        hit["out"] = self._with_feedforward(run, x if targets is None else targets, hit["out"], log_time_factor)
        return hit

    def _evaluate_direct(self, run, x, w, domain, log_time_factor, count, heads, causal, targets):
        """`_evaluate`'s attention output through the direct kernel sums (`meanfield.sums.kernelsums`)."""
        heads = self._heads if heads is None else heads
        out = den = c_den = counts = None
        d = x.shape[-1]
        threads = self.threads if run is None else run.threads
        free = self._energy_head(domain, heads)
        for h, head in enumerate(heads):
            mask = None if causal is None else causal[h if h < len(causal) else 0]
            if self.model.attention in NORMALISED:
                y = self._normalised_attention(run, x, head, h, w, domain, threads, mask, targets)
                out = y if out is None else out + y
                continue
            res = self._attention_sums(x, head, w, domain, threads, 1.0 - self.delta if count and free else None,
                                       mask, targets)
            acc, c = res[0], res[1]
            if self.model.normalized:
                y = compiled.ratio(acc)
            elif mask is not None:                  # e^{c_i}/D_i as one exponential: both may underflow
                y = acc[..., :d] * self._masked_scale(c, mask, log_time_factor)[..., None]
            else:
                scale = np.exp(np.asarray(c) - log_time_factor)
                y = acc[..., :d] * (scale[..., None] if np.ndim(scale) else scale)
            if mask is not None:
                y = self._masked_output(y, mask, divided=True)
            out = y if out is None else out + y
            if free:
                den, c_den, counts = acc[..., d], c, (res[2] if count else None)
        if count and counts is None:
            counts = gram_counts(x, x, 1.0 - self.delta, chunk=self.chunk, threads=threads)
        return {"x": x, "out": out, "den": den, "c": c_den, "counts": counts, "heads": heads}

    def _normalised_attention(self, run, x, head, h, w, domain, threads, mask, targets):
        """One head's output Σ_j A_ij V x_j under L2 or Sinkhorn attention (`meanfield.sums.sinkhorn`,
        docs/attention.md), at the particles or at ``targets``. L2: softmax's sums with the column term
        −(β/2)‖Kx_j‖² (none on the sphere with KᵀK = I, where it is a constant), and under a mask the
        ALiBi term; Sinkhorn: the log-domain iterations, warm-started from the run's last potentials of
        this head, their counts kept in ``run.workspace["sinkhorn"]``."""
        model = self.model
        v = head["v"]
        values = x @ head["Vt"] if v is None else (x if v == 1.0 else v * x)
        if model.attention == "l2":
            col = None if (domain == "sphere" and head["KtK"] is None) else l2_bias(x, model.beta, head["KtK"])
            row = ends = None
            if mask is not None:
                ends = mask.ends
                if mask.bias is not None:
                    row, col = mask.bias[0], mask.bias[1] + (0.0 if col is None else col)
            F = np.concatenate([values * w[:, None], np.broadcast_to(w[:, None], values.shape[:-1] + (1,))], -1)
            S, _ = biased_sums(x if targets is None else targets, x, F, model.beta, M=head["M"], row=row, col=col,
                               chunk=self.chunk, threads=threads, ends=ends)
            with np.errstate(invalid="ignore", divide="ignore"):      # 0/0 at the silent tokens: set to 0
                y = S[..., :-1] / S[..., -1:]
            return y if mask is None else self._masked_output(y, mask, divided=True)
        keep = None if run is None else self._sinkhorn_record(run)
        start = None if keep is None else keep["potentials"].get(h)
        if start is not None and start[0].shape != x.shape[:-1]:
            start = None
        res = sinkhorn(x, w, model.beta, M=head["M"], values=values, eps=model.sinkhorn_eps, tol=model.sinkhorn_tol,
                       f=None if start is None else start[0], g=None if start is None else start[1],
                       chunk=self.chunk, threads=threads)
        if keep is not None:
            keep["potentials"][h] = (res.f, res.g)
            keep["iterations"] += res.iterations
            keep["solves"] += 1
            keep["max_error"] = max(keep["max_error"], res.error)
            keep["window_iterations"] += res.iterations
            keep["window_error"] = max(keep["window_error"], res.error)
        if targets is None:
            return res.out
        return sinkhorn_output(targets, x, w, model.beta, res.g, M=head["M"], values=values, eps=model.sinkhorn_eps,
                               chunk=self.chunk, threads=threads)

    @staticmethod
    def _sinkhorn_record(run):
        """The run's Sinkhorn record: the last potentials of each head (the warm start), the iterations and
        solves in all, the largest marginal error, and the iterations and error since the last saved time."""
        return run.workspace.setdefault("sinkhorn", {"potentials": {}, "iterations": 0, "solves": 0, "max_error": 0.0,
                                                     "window_iterations": 0, "window_error": 0.0})

    def _sinkhorn_diagnostics(self, run, t, x):
        """At a saved time of a Sinkhorn run: ``sinkhorn_iterations`` and ``sinkhorn_error`` (the iterations
        done and the largest marginal error since the previous saved time), and ``sinkhorn_energy``, the sum
        over the heads of F = −(ε/2β)(⟨w, f⟩ + ⟨w, g⟩) at x (`meanfield.sums.sinkhorn.sinkhorn_energy`; NaN for
        β = 0), whose gradient ascent the flow is for V = QᵀK symmetric (docs/attention.md)."""
        model, keep = self.model, self._sinkhorn_record(run)
        out = {"sinkhorn_iterations": keep["window_iterations"], "sinkhorn_error": keep["window_error"]}
        keep["window_iterations"], keep["window_error"] = 0, 0.0
        if model.beta == 0:
            out["sinkhorn_energy"] = np.full(x.shape[:-2], np.nan)
            return out
        energy = 0.0
        for h, head in enumerate(self._heads_at(run, t)):
            start = keep["potentials"].get(h)
            if start is not None and start[0].shape != x.shape[:-1]:
                start = None
            res = sinkhorn(x, run.weights, model.beta, M=head["M"], eps=model.sinkhorn_eps, tol=model.sinkhorn_tol,
                           f=None if start is None else start[0], g=None if start is None else start[1],
                           chunk=self.chunk, threads=run.threads)
            keep["potentials"][h] = (res.f, res.g)
            keep["iterations"] += res.iterations
            keep["solves"] += 1
            keep["max_error"] = max(keep["max_error"], res.error)
            energy = energy + sinkhorn_energy(x, run.weights, model.beta, model.sinkhorn_eps, res.f, res.g, head["M"])
        out["sinkhorn_energy"] = energy
        return out

    def _with_feedforward(self, run, x, out, log_time_factor=0.0):
        """The attention output plus the feed-forward term F(x) = W act(Ux + b) of the run (``mlp``) or
        the model (`meanfield.transformer.feedforward`; e^{−β}F in time τ = e^β t), before any projection or speed."""
        ff = self.model.feedforward if run is None or run.feedforward is None else run.feedforward
        if ff is None:
            return out
        F = ff.value(x)
        return out + (F * np.exp(-log_time_factor) if log_time_factor else F)

    def _evaluate_spectral(self, x, w, threads, log_time_factor=0.0, causal=None, targets=None):
        """`_evaluate` through the spectral sums (zonal heads, S^1/S^2): with Zs = Σ_j w_j e^{β(⟨x_i, x_j⟩ − 1)}
        and G = e^{−|β|}∇_S Z/β (`meanfield.sums.spectralsums`), the (SA) field is v G/Zs and the (USA) one
        v e^{|β|} G, summed over the heads, each with its own β, v and mask (`meanfield.Model.head_models`);
        the denominators Zs with c = |β| give the energy of one unmasked head. No pair counts come with
        these sums (`_diagnostics` counts the clustered pairs with a spatial index). Under a mask the sums
        run over C(i) (`meanfield.sums.spectralsums.causal_zonal_sums`) and give no energy."""
        out, models = None, self.model.head_models
        for h, model in enumerate(models):
            mask = None if causal is None else causal[h]
            y, Zs = self._spectral_head(model, x, w, threads, log_time_factor, mask, targets)
            out = y if out is None else out + y
        if len(models) > 1 or models[0].beta != self.model.beta:      # not the kernel of the energy (3.5)
            Zs = None
        return {"x": x, "out": out, "den": Zs, "c": np.float64(abs(self.model.beta)), "counts": None,
                "heads": self._heads}

    def _spectral_head(self, model, x, w, threads, log_time_factor, mask, targets):
        """One zonal head's output through the spectral sums, and its denominators Zs (None under a mask)."""
        beta, v = model.beta, model.v
        sums = zonal_sums(beta, model.dim, EPSILON, threads, x.shape[-2])
        if mask is None:
            Zs, G = sums.sums(x if targets is None else targets, x, w)
        else:
            Zs, G = causal_zonal_sums(sums, x, w, mask.ends, mask.positions, mask.slope, threads=threads)
        if model.normalized:
            with np.errstate(invalid="ignore"):               # 0/0 at the silent tokens, set to 0 below
                out = G / Zs[..., None]
        else:
            out = G * np.exp(abs(beta) - log_time_factor)
        if mask is not None:
            out = self._masked_output(out, mask)
            Zs = None
        if v != 1.0:
            out *= v
        return out, Zs

    @staticmethod
    def _masked_scale(c, causal, log_time_factor):
        """e^{c_i − log_time_factor}/D_i: the (USA) sums' shift over the positional normaliser, formed as one
        exponential e^{c_i − log_time_factor − log D_i} where D_i underflows; 0 at the silent tokens."""
        c = np.asarray(c, dtype=float)
        normal = causal.normaliser >= np.finfo(float).tiny
        with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
            scale = np.where(normal, np.exp(c - log_time_factor) / np.where(normal, causal.normaliser, 1.0),
                             np.exp(c - log_time_factor - causal.log_normaliser))
        return np.where(causal.silent, 0.0, scale)

    def _masked_output(self, y, causal, divided=False):
        """A head's output under a mask: (USA) divided by the positional normaliser D_i (unless ``divided``),
        and zero for the silent tokens (an empty C(i) of no weight)."""
        if not self.model.normalized and not divided:
            y = y / np.where(causal.silent, 1.0, causal.normaliser)[:, None]
        if causal.silent.any():
            y[..., causal.silent, :] = 0.0
        return y

    def _energy(self, hit, w):
        """E_β (3.5) = e^c Σ_i w_i den_i / 2β from an evaluation (one value per realisation)."""
        beta = self.model.beta
        if beta == 0:
            return discrete_energy(0.0, hit["x"], w)
        den, c = hit["den"], np.asarray(hit["c"], dtype=float)
        if c.ndim:                                      # a running shift per row: fold it into the sum
            top = float(c.max())
            den, c = den * np.exp(c - top), top
        e = energy_from_scaled_sum(beta, np.einsum("...i,i->...", den, w), float(c))
        return float(e) if np.ndim(e) == 0 else e

    def _field(self, run, x, w, project, domain="sphere", log_time_factor=0.0, t=0.0, causal=None):
        """Σ_h (attention output) at the particles x, projected onto the tangent spaces if asked."""
        out = self._evaluate(run, x, w, domain, log_time_factor, heads=self._heads_at(run, t), causal=causal)["out"]
        return self._project(x, out) if project else out

    @staticmethod
    def _project(x, out):
        return compiled.project(x, out)

    @staticmethod
    def _cached(run, y, heads):
        """The evaluation kept for the state y (the same array values) under these heads, or None."""
        hit = run.workspace.get("evaluation")
        if hit is None or hit["heads"] is not heads:
            return None
        x = hit["x"]
        if x is y or (x.shape == y.shape and x.ravel()[:4].tolist() == y.ravel()[:4].tolist() and np.array_equal(x, y)):
            return hit
        return None

    def velocity(self, x, weights=None, *, rescale_time=False, token_positions=None, t=0.0, radii=None):
        """X[μ](x_i) at the particles ((2.3)/(2.7)/(3.2)): x (n, d) or (B, n, d) on the sphere.

        ``weights`` (n,) default 1/n. With ``rescale_time=True`` ((USA) only) returns e^{−β}X, the
        velocity in τ = e^β t (finite for every β). A masked model takes the tokens in order, at
        ``token_positions`` (default j/n; `meanfield.transformer.masks`). Under a normalisation scheme other than
        "post" it is the direction velocity θ̇ = s⁻¹ P_θ A at time ``t`` with the token norms ``radii``
        (default 1; `meanfield.transformer.normalization`).
        """
        x = check_points(x, "x0", dim=self.model.dim, min_ndim=2)
        w = check_weights(weights, x.shape[-2])
        causal = model_mask(self.model, w, token_positions)
        shift = self.model.beta if (rescale_time and not self.model.normalized) else 0.0
        if choose_sums(self.sums, self.model, x.shape[-2], w, tol=self.sums_tol, causal=causal,
                       heads=True)[0] == "spectral":
            out = self._with_feedforward(None, x, self._evaluate_spectral(x, w, self.threads, shift, causal)["out"],
                                         shift)
        else:
            out = self._field(None, x, w, project=False, log_time_factor=shift, causal=causal)
        if self.model.normalization == "post":
            return self._project(x, out)
        t = check_real(t, "t", low=0.0)
        return direction_velocity(self.model, t, x, check_radii(radii, x.shape[:-1]), out)

    def _choose_method(self, method, options):
        scheme = options.pop("scheme", None)
        if scheme is not None:
            if scheme not in ("adaptive", "euler-normalize"):
                raise InvalidInput(f"`scheme` must be 'adaptive' or 'euler-normalize', got {scheme!r}.")
            if method is not None:
                raise InvalidInput("pass either `method` or `scheme`, not both.")
            if scheme == "euler-normalize":
                return scheme
        if method is None:
            return "euler-maruyama" if self.model.noise > 0 else "dopri5"
        return method

    def _configure(self, run):
        o = run.options
        domain, rescaled = o["domain"], o["rescaled"]
        if domain not in ("sphere", "euclidean"):
            raise InvalidInput(f"`domain` must be 'sphere' or 'euclidean', got {domain!r}.")
        if not isinstance(rescaled, (bool, np.bool_)):
            raise InvalidInput(f"`rescaled` must be True or False, got {rescaled!r}.")
        if rescaled and domain != "euclidean":
            raise InvalidInput("`rescaled=True` (z = e^{-tV} x, (9.2)-(9.3)) needs domain='euclidean'.")
        if rescaled and len(self.model.heads) != 1:
            raise UnsupportedModel("`rescaled=True` needs a single head (one value matrix V).")
        adaptive = run.method in ("dopri5", "bs32")
        if rescaled and not adaptive:
            raise InvalidInput("`rescaled=True` is only available with the adaptive methods (and without noise).")
        if self.model.noise > 0 and adaptive:
            raise InvalidInput(f"`method`={run.method!r} is deterministic; particles with noise > 0 use "
                             "method='euler-maruyama' (default) or 'euler-normalize'.")
        beta = self.model.beta
        if o["rescale_time"]:
            if self.model.normalized:
                raise InvalidInput("`rescale_time=True` is for (USA) only (normalized=False); (SA) velocities are bounded.")
            run.log_time_factor = beta
        else:
            run.log_time_factor = 0.0
            if self._usa_overflows(self._heads, domain, 0.0):
                raise InvalidInput(f"(USA) with `beta`={beta:g}: the velocity is of size e^beta, beyond float64 for "
                                 f"beta > {_EXP_MAX:g}. Pass rescale_time=True to integrate in tau = e^beta t.")
        check_sums(self.sums, self.model, domain, heads=True)
        run.domain, run.rescaled = domain, bool(rescaled)
        run.sums, run.sums_error_bound = "direct", 0.0      # chosen with the initial state (n, weights)
        run.retracts = domain == "sphere"
        run.magnitude = point_norms
        run.adaptive = adaptive
        run.threads = self.threads if o["threads"] is None else check_threads(o["threads"])
        run.diagnostics_level = self.diagnostics_level if o["diagnostics"] is None else self._check_diagnostics(o["diagnostics"])
        run.save = self._check_save(o["save"], run.t_eval)
        run.parameters = o["parameters"]
        if o["token_positions"] is not None and not self.model.is_causal:
            model_mask(self.model, None, o["token_positions"])    # the ValueError naming `token_positions`
        self._configure_normalization(run)
        if isinstance(run.parameters, Schedule) and any(set(p) != {"heads"} for p in run.parameters.pieces):
            raise InvalidInput("`parameters` as a Schedule sets the heads of each piece only; put β and the MLP in "
                             "Model(schedule=...).")
        if run.parameters is not None and (rescaled or self.sums == "spectral"):
            raise InvalidInput("`parameters` (per-realisation or time-dependent heads) need the direct sums "
                             "(sums='auto' or 'direct') and rescaled=False.")

    def _configure_normalization(self, run):
        scheme = self.model.normalization
        if scheme == "post":
            return
        if run.domain != "sphere" or self.model.noise > 0:
            raise InvalidInput(f"`normalization`={scheme!r} moves tokens on the sphere without noise: it needs "
                             f"domain='sphere' and noise 0, got domain={run.domain!r}, noise={self.model.noise:g}.")
        run.radial = carries_radius(self.model)
        run.retracts = not run.radial

    @staticmethod
    def _check_diagnostics(diagnostics):
        if isinstance(diagnostics, str):
            if diagnostics not in ("auto", "full", "none"):
                raise InvalidInput(f"`diagnostics` must be 'auto', 'full', 'none' or a sequence of names among "
                                 f"{DIAGNOSTICS}, got {diagnostics!r}.")
            return diagnostics
        try:
            names = tuple(diagnostics)
        except TypeError:
            names = (diagnostics,)
        bad = [k for k in names if k not in DIAGNOSTICS]
        if bad:
            raise InvalidInput(f"`diagnostics` must be 'auto', 'full', 'none' or names among {DIAGNOSTICS}, got {bad}.")
        return frozenset(names)

    @staticmethod
    def _check_save(save, t_eval):
        """One of SAVE, or a boolean mask over t_eval for a list of saved times."""
        if isinstance(save, str):
            if save not in SAVE:
                raise InvalidInput(f"`save` must be one of {SAVE} or a list of saved times, got {save!r}.")
            return save
        try:
            times = np.atleast_1d(np.asarray(save, dtype=float))
        except (TypeError, ValueError):
            raise InvalidInput(f"`save` must be one of {SAVE} or a list of saved times, got {save!r}.") from None
        t_eval = np.asarray(t_eval, dtype=float)
        mask = np.zeros(t_eval.size, dtype=bool)
        for t in times.ravel():
            hit = np.flatnonzero(np.abs(t_eval - t) <= 1e-12 * max(1.0, abs(t)))
            if hit.size == 0:
                raise InvalidInput(f"`save` lists t={t:g}, which is not one of the saved times `t_eval`.")
            mask[hit] = True
        return mask

    def _scheme_terms(self, run, t, y):
        """(θ, r, A) at the state y of a normalisation scheme: directions, radii and attention outputs."""
        theta = compiled.normalise(y)
        radii = point_norms(y) if run.radial else run.radii
        heads = self._heads_at(run, t)
        hit = self._cached(run, theta, heads)
        if hit is None:
            hit = run.workspace["evaluation"] = self._evaluate(run, theta, run.weights, run.domain,
                                                               run.log_time_factor, heads=heads)
        return theta, radii, hit["out"]

    def _rhs(self, run, t, y):
        w, domain = run.weights, run.domain
        if self.model.normalization != "post":
            theta, radii, A = self._scheme_terms(run, t, y)
            if run.radial:
                return position_velocity(self.model, t, theta, radii, A)
            return direction_velocity(self.model, t, theta, radii, A)
        if domain == "sphere":
            if run.adaptive:                     # X(y/|y|): unchanged by the retraction (retract_invariant)
                y = compiled.normalise(y)
            heads = self._heads_at(run, t)
            hit = self._cached(run, y, heads)
            if hit is None:                      # kept: the last stage is the next saved state's (FSAL)
                hit = run.workspace["evaluation"] = self._evaluate(run, y, w, domain, run.log_time_factor,
                                                                   heads=heads)
            return self._project(y, hit["out"])
        if not run.rescaled:
            return self._field(run, y, w, False, domain, t=t)
        # rescaled form (9.2)–(9.3): x = e^{tV} z, ż_i = −V z_i + e^{−tV} Σ_j A_ij V x_j
        V = self.model.V
        E = expm(t * V)
        f = self._field(run, y @ E.T, w, False, domain)
        return -(y @ V.T) + f @ np.linalg.inv(E).T

    @classmethod
    def from_segment(cls, segment):
        return cls(segment.model, diagnostics="none", sums=segment.stats.get("sums", "auto"))

    def _tracer_velocity(self, run, t, y, points):
        """X[μ_t](z) = P_z Σ_h (attention output at z) of the particles' measure μ_t at the tracers z,
        from the sums of the particles' own field (same heads, same sums)."""
        x = compiled.normalise(y) if run.adaptive else y
        hit = self._evaluate(run, x, run.weights, run.domain, run.log_time_factor, heads=self._heads_at(run, t),
                             targets=points)
        return self._project(points, hit["out"])

    def _check_tracers(self, run):
        super()._check_tracers(run)
        if run.domain != "sphere" or run.batch is not None or run.options["radii"] is not None:
            raise InvalidInput("`tracers` move on the sphere with one realisation of the particles: they need "
                             "domain='sphere', positions of shape (n, d) and no `radii`.")

    def _euler_velocity(self, run, t, y):
        """The authors' unprojected update direction Σ_h A_h V_h x (euler-normalize)."""
        if run.domain != "sphere" or run.radial:
            return self._rhs(run, t, y)
        if self.model.normalization != "post":
            theta, radii, A = self._scheme_terms(run, t, y)
            return inverse_speed(self.model, t, radii, A) * A
        heads = self._heads_at(run, t)
        hit = self._cached(run, y, heads)                           # the saved state's evaluation
        if hit is None:
            hit = self._evaluate(run, y, run.weights, run.domain, run.log_time_factor, heads=heads)
        return hit["out"]

    def _stats(self, run):
        """The sums, and the inputs of ``solve`` a continuation needs: ``token_positions`` (n,) and the
        run's own feed-forward term (``mlp_W``, ``mlp_U``, ``mlp_b``) as arrays (written to files as
        variables ``input_*``), ``parameters`` as a note (a file cannot hold them)."""
        out = {"sums": run.sums, "sums_error_bound": float(run.sums_error_bound)}
        if self.model.attention == "sinkhorn":
            keep = self._sinkhorn_record(run)
            out.update(sinkhorn_iterations=int(keep["iterations"]), sinkhorn_solves=int(keep["solves"]),
                       sinkhorn_max_error=float(keep["max_error"]))
        if run.options["token_positions"] is not None:
            out["token_positions"] = np.array(run.options["token_positions"], dtype=float)
        if run.feedforward is not None and run.options["mlp"] is not None:
            out.update(zip(RUN_MLP, (np.array(a) for a in check_mlp(run.options["mlp"], self.model.dim, "mlp",
                                                                     run.batch))))
        if run.parameters is not None:
            out["parameters"] = "given to solve (per-realisation or time-dependent heads)"
        return out

    def _tangent_noise(self, run, y, xi):
        if run.domain == "sphere":
            xi -= np.einsum("...d,...d->...", y, xi)[..., None] * y
        return xi

    # -- Solver contract -------------------------------------------------------------------------
    def memory_estimate(self, n, batch=1):
        """Bytes a run of ``batch`` realisations of ``n`` particles needs: about 16 copies of the
        positions (the stages of the adaptive pair, the kernel sums' right-hand sides) and 4 blocks
        of chunk² pairwise values per realisation."""
        return 8 * batch * (16 * n * self.model.dim + 4 * min(self.chunk, n) ** 2)

    def _initial_from_data(self, run, x0, normalize, weights=None, radii=None):
        shape = np.shape(x0)
        if len(shape) in (2, 3):           # refused before anything is computed on the positions
            check_memory(self.memory_estimate(shape[-2], shape[0] if len(shape) == 3 else 1), "x0", tuple(shape))
        x = self._check_x(x0, normalize, run.domain)
        w = run.options["weights"] if weights is None else weights
        if weights is not None and run.options["weights"] is not None:
            raise InvalidInput("`weights` given twice: in the (points, weights) pair and as `weights`.")
        run.weights = check_weights(w, x.shape[-2], normalize=normalize, hint=NORMALIZE_WEIGHTS)
        run.batch = x.shape[0] if x.ndim == 3 else None
        run.causal = model_mask(self.model, run.weights, run.options["token_positions"])
        self._choose_sums(run)
        if isinstance(run.parameters, Schedule):
            run.heads = self._checked_parameters(run, run.parameters.pieces[run.parameters.index(run.t_eval[0])]["heads"])
        elif run.parameters is not None and not callable(run.parameters):
            run.heads = self._checked_parameters(run, run.parameters)
        save = run.save
        if isinstance(save, str) and save == "auto":
            save = "positions" if len(run.t_eval) * x.nbytes <= AUTO_SAVE_BYTES else "ends"
        if isinstance(save, str):
            keep = {"positions": None, "diagnostics": np.zeros(len(run.t_eval), dtype=bool)}.get(save)
            if save == "ends":
                keep = np.zeros(len(run.t_eval), dtype=bool)
                keep[[0, -1]] = True
            save = keep
        run.kept = save                          # None: every position (ParticleCloud)
        if run.options["mlp"] is not None:
            run.feedforward = FeedForward(*check_mlp(run.options["mlp"], self.model.dim, "mlp", run.batch),
                                          self.model.activation)
        given = run.options["radii"]
        if given is not None and run.domain != "sphere":
            raise InvalidInput("`radii` (the token norms) apply to domain='sphere'.")
        run.radii = check_radii(radii if given is None else given, x.shape[:-1])
        return x * run.radii if run.radial else x

    def _choose_sums(self, run):
        """The kernel sums of the run (`meanfield.sums.spectralsums.choose_sums`; direct with ``parameters``)."""
        run.sums, run.sums_error_bound = choose_sums(self.sums, self.model, run.weights.size, run.weights,
                                                     domain=run.domain, tol=self.sums_tol, causal=run.causal,
                                                     heads=True)
        if run.parameters is not None:
            run.sums, run.sums_error_bound = "direct", 0.0

    def _adopt_model(self):
        """A piece of the schedule: its heads prepared, its sums checked."""
        self.sums = check_sums(self.sums, self.model, heads=True)
        self._heads = self._prepare_heads(self.model.heads)

    def _breakpoints(self, run, start, end):
        """The schedule's breakpoints and those of ``parameters`` given as a `meanfield.Schedule` (`Layers`)."""
        own = super()._breakpoints(run, start, end)
        if not isinstance(run.parameters, Schedule):
            return own
        return np.union1d(own, run.parameters.breakpoints(start, end))

    def _enter_piece(self, run, t):
        """The next piece: its solver, the sums chosen for its β, the heads of ``parameters`` at t."""
        super()._enter_piece(run, t)
        run.solver._choose_sums(run)
        if isinstance(run.parameters, Schedule):
            run.heads = run.solver._checked_parameters(run, run.parameters.pieces[run.parameters.index(t)]["heads"])

    def _initial_from_measure(self, run, points, weights, normalize):
        return self._initial_from_data(run, points, normalize, weights=np.asarray(weights, dtype=float))

    def _initial_from_grid(self, run, grid, normalize):
        """Density values on a grid (`meanfield.measures.densities.on_grid`): the grid points with weights w_j ρ_j."""
        points, weights = grid.unit_mass(normalize, self.model.dim).measure()
        return self._initial_from_data(run, points, False, weights=weights)

    def _initial_from_callable(self, run, rho0, normalize):
        raise InvalidInput("`x0` must be particle positions (n, d) or (B, n, d), a (points, weights) pair or a particle "
                         "Solution; to start from a density, draw particles with meanfield.sample(density, n, dim).")

    def _initial_from_solution(self, run, sol):
        if not sol.representation.point_cloud:
            raise InvalidInput(f"`x0` is a {sol.representation.name!r} Solution; continue it with its own solver, or "
                             "sample its last measure: meanfield.sample / sol.measure(-1).")
        w = sol.weights if run.options["weights"] is None else None
        radii = sol.diagnostics.get("radii")
        self._inputs_of(run, sol)
        return self._initial_from_data(run, sol.measure(-1, batch=slice(None))[0], False, weights=w,
                                       radii=None if radii is None else radii[-1])

    @staticmethod
    def _inputs_of(run, sol):
        """The inputs of ``solve`` the run ``sol`` depended on (`_stats`), taken up by its continuation
        unless given again: its token positions and its own MLP. Per-realisation or time-dependent heads
        (``parameters``) cannot travel in a file: without them the continuation is refused."""
        stats = sol.stats
        if run.options["token_positions"] is None and stats.get("token_positions") is not None:
            run.options["token_positions"] = np.asarray(stats["token_positions"], dtype=float)
        if run.options["mlp"] is None and all(stats.get(k) is not None for k in RUN_MLP):
            run.options["mlp"] = tuple(np.asarray(stats[k], dtype=float) for k in RUN_MLP)
        if run.parameters is None and stats.get("parameters") is not None:
            raise InvalidInput("`parameters`: the run being continued had per-realisation or time-dependent heads "
                               "(`parameters` given to solve), which its Solution cannot hold; pass the same "
                               "`parameters` again to continue it.")

    def _representation(self, run):
        if run.kept is None:
            return ParticleCloud(run.weights, self.model.dim, domain=run.domain)
        return SampledParticleCloud(run.weights, self.model.dim, domain=run.domain, batch=run.batch)

    def _keep(self, run, i, y):
        if run.kept is None:
            return y
        if run.radial and isinstance(y, np.ndarray) and y.dtype != object:
            y = compiled.normalise(y)
        return saved_slice(y if i < run.kept.size and run.kept[i] else None)

    def _to_data(self, run, y):
        if run.kept is None:
            return compiled.normalise(y) if run.radial else np.array(y, copy=True)
        if isinstance(y, np.ndarray) and y.dtype == object:
            return y
        return saved_slice(np.array(y, copy=True))     # a state that reached the Solution without `_keep`: kept

    def _retract(self, run, y):
        return compiled.normalise(y)      # y / np.linalg.norm(y, axis=-1, keepdims=True), bit for bit

    def _retract_euler(self, run, y, h, f):
        return compiled.euler_normalise(y, h, f)         # normalise(y + h·f) in one pass, bit for bit

    def _wanted(self, run, y, heads=None):
        """The diagnostics recorded for this run (see ``diagnostics``)."""
        level = run.diagnostics_level
        if run.domain != "sphere" or (isinstance(level, str) and level == "none"):
            return frozenset()
        if not isinstance(level, str):
            return level
        if level == "full":
            return frozenset(FULL)
        n = y.shape[-2]
        names = set()
        if self._energy_head(run.domain, heads) or run.kept is not None:
            names.add("energy")
        if n <= 4096:
            names.update(("clustered_fraction", "clusters"))
        if y.ndim == 2 and n <= 1024:
            names.add("w1_to_dirac")
        return frozenset(names)

    def _diagnostics(self, run, t, y):
        theta = compiled.normalise(y) if run.radial else y
        out = self._direction_diagnostics(run, t, theta)
        if self.model.attention == "sinkhorn" and not (isinstance(run.diagnostics_level, str)
                                                       and run.diagnostics_level == "none"):
            out.update(self._sinkhorn_diagnostics(run, t, theta))
        if self.model.normalization == "post" and run.options["radii"] is None:
            return out
        radii = point_norms(y) if run.radial else run.radii
        out["radii"] = radii[..., 0].copy()
        return out

    def _direction_diagnostics(self, run, t, y):
        heads = self._heads_at(run, t)
        wanted = self._wanted(run, y, heads)
        out = {}
        if not wanted:
            return out
        count = "clustered_fraction" in wanted
        hit = self._cached(run, y, heads)
        free = self._energy_head(run.domain, heads)
        if hit is None and (("energy" in wanted and free) or (count and not run.adaptive)):
            # one evaluation of the field at y gives the energy and the counts, and a fixed step from y
            # reuses it (an adaptive step's last stage is the evaluation at its end, and a saved time
            # between steps, from the interpolant, only needs the inner products for its counts)
            hit = self._evaluate(run, y, run.weights, run.domain, run.log_time_factor, count=count, heads=heads)
            run.workspace["evaluation"] = hit
        if "energy" in wanted:
            out["energy"] = (ParticleCloud(run.weights, self.model.dim).energy(self.model.beta, y)
                             if hit is None or hit["den"] is None else self._energy(hit, run.weights))
        if count and run.sums == "spectral":
            out["clustered_fraction"] = clustered_pair_fraction(y, self.delta)
        elif count:
            counts = None if hit is None else hit["counts"]
            if counts is None:                   # no counts came with the sums: inner products only
                counts = gram_counts(y, y, 1.0 - self.delta, chunk=self.chunk, threads=run.threads)
                if hit is not None:
                    hit["counts"] = counts
            out["clustered_fraction"] = self._clustered_fraction(y, counts)
        if "cluster_sizes" in wanted:           # the same components as the count: counted once
            out["cluster_sizes"] = cluster_sizes(y, self.cluster_delta)
        if "clusters" in wanted:
            out["clusters"] = (out["cluster_sizes"].sum(-1) if "cluster_sizes" in out
                               else count_clusters(y, self.cluster_delta, chunk=self.chunk))
        if "w1_to_dirac" in wanted:
            out["w1_to_dirac"] = w1_to_nearest_dirac(y, run.weights)
        if "span_dimension" in wanted:
            out["span_dimension"] = span_dimension(y)
        return out

    def _clustered_fraction(self, y, counts):
        """Fraction of ordered pairs i ≠ j with ⟨x_i, x_j⟩ >= 1 − δ (Figure 3) from the row counts
        (which include i = j when |x_i|² >= 1 − δ), one value per realisation."""
        n = y.shape[-2]
        if n == 1:
            frac = np.ones(y.shape[:-2])
        else:                                    # unit vectors: |x_i|² = 1 ± 4e-16 >= 1 − δ
            diag = n if self.delta >= 1e-12 else np.count_nonzero(np.square(y) @ np.ones(y.shape[-1]) >= 1.0 - self.delta,
                                                                   axis=-1)
            frac = (counts.sum(axis=-1) - diag) / (n * (n - 1))
        return float(frac) if np.ndim(frac) == 0 else frac

    def _check_x(self, x0, normalize, domain):
        d = self.model.dim
        name = "x0"
        if domain == "sphere":
            x = check_points(x0, name, dim=d, normalize=normalize, min_ndim=2, hint=NORMALIZE_POINTS)
        else:
            try:
                x = np.asarray(x0, dtype=float)
            except (TypeError, ValueError):
                raise InvalidInput(f"`{name}` must be an array of shape (n, d) or (B, n, d).") from None
            if x.ndim < 2 or x.shape[-1] != d:
                raise InvalidInput(f"`{name}` must have shape (n, {d}) or (B, n, {d}), got {x.shape}.")
            if not np.all(np.isfinite(x)):
                raise InvalidInput(f"`{name}` contains NaN or inf.")
        if x.ndim not in (2, 3) or x.shape[-2] < 1:
            raise InvalidInput(f"`{name}` must have shape (n, {d}) or (B, n, {d}) with n >= 1, got {x.shape}.")
        return x
