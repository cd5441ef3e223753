"""The model: which self-attention dynamics on S^{d-1} ((2.3)–(2.7), (3.2); docs/mathematics.md §1–§2, §6).

Besides the paper's layer (Post-LN, attention alone, every token attending to every token) a model
states the parts of a decoder layer that the field now studies: a causal mask with an ALiBi position
bias (docs/causal.md), where the normalisation sits (docs/normalization.md) and a feed-forward term.
Solvers state which of these they take (`solvers.base.Solver` capabilities) and refuse the others
with `UnsupportedModel` naming the argument.
"""
import functools
import json

import numpy as np

from . import feedforward
from .feedforward import FeedForward, check_mlp
from .schedule import Schedule
from ..validation import check_beta, check_dim, check_memory, check_real
from ..errors import InvalidInput

_ZONAL_TOL = 1e-12
MASKS = ("none", "causal", "causal-strict")
NORMALIZATIONS = ("post", "pre", "mix", "peri", "ngpt", "sqrt-depth")
ACTIVATIONS = tuple(feedforward.ACTIVATIONS)     # the names of feedforward.ACTIVATIONS, the default first
ATTENTIONS = ("softmax", "hardmax", "sinkhorn", "l2")


def _as_matrix(value, name, rows=None, cols=None):
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInput(f"`{name}` must be a real matrix.") from None
    if a.ndim != 2:
        raise InvalidInput(f"`{name}` must be a 2-D matrix, got shape {a.shape}.")
    if not np.all(np.isfinite(a)):
        raise InvalidInput(f"`{name}` contains NaN or inf.")
    if rows is not None and a.shape[0] != rows:
        raise InvalidInput(f"`{name}` must have {rows} rows, got shape {a.shape}.")
    if cols is not None and a.shape[1] != cols:
        raise InvalidInput(f"`{name}` must have {cols} columns, got shape {a.shape}.")
    return a


def _choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise InvalidInput(f"`{name}` must be one of {', '.join(repr(c) for c in choices)}, got {value!r}.")
    return value


def _check_slopes(position_bias, heads):
    """The ALiBi slopes λ_h >= 0, one per head: a number (the same for every head) or a sequence of
    ``heads`` numbers (ValueError naming `position_bias`; a string or a bool is not a number)."""
    if isinstance(position_bias, (str, bytes)):
        raise InvalidInput("`position_bias` must be a real number >= 0 or one per head, got the string "
                         f"{position_bias!r}.")
    if np.ndim(position_bias) == 0:
        return (check_real(position_bias, "position_bias", low=0.0),) * heads
    values = list(np.asarray(position_bias, dtype=object).ravel()) if np.ndim(position_bias) == 1 else None
    if values is None or len(values) != heads:
        raise InvalidInput(f"`position_bias` must be one slope, or one per head ({heads} numbers >= 0), "
                         f"got {position_bias!r}.")
    out = []
    for h, value in enumerate(values):
        if isinstance(value, (str, bytes)):
            raise InvalidInput(f"`position_bias[{h}]` must be a real number >= 0, got the string {value!r}.")
        out.append(check_real(value, f"position_bias[{h}]", low=0.0))
    return tuple(out)


def _scaled_identity(A, v):
    """Whether the square matrix A is v·I to within _ZONAL_TOL, in O(d²) without a d × d temporary."""
    d = A.shape[0]
    diagonal = np.diagonal(A)
    if A.shape != (d, d) or not np.all(np.abs(diagonal - v) <= _ZONAL_TOL):
        return False
    if np.count_nonzero(A) == np.count_nonzero(diagonal):      # nothing off the diagonal
        return True
    off = A.ravel()[:-1].reshape(d - 1, d + 1)[:, 1:]           # the entries off the diagonal, row by row
    return bool(np.abs(off).max() <= _ZONAL_TOL)


class Model:
    """Self-attention dynamics on the sphere S^{dim-1}.

    Parameters
    ----------
    beta : float, of either sign
        Inverse temperature β in e^{β⟨Qx, Ky⟩}. β < 0 is not repulsion (the attention weights stay
        positive): on the circle the literature studies it for the threshold of synchronisation
        (docs/negative-beta.md).
    dim : int >= 2
        Ambient dimension d; particles live on S^{d-1}.
    normalized : bool
        True for (SA) (softmax, partition function Z, eq. (2.6)/(3.2)); False for (USA) (Z replaced
        by n, eq. (USA)/(3.8)).
    V : float or (d, d) array
        Value matrix; a scalar v means v·I. V = 1 is attractive, V = -1 repulsive (docs/mathematics.md §1).
    Q, K : (m, d) arrays, optional
        Query and key matrices (default identity). Rectangular matrices are allowed.
    heads : list of (Q, K, V), optional
        Multi-head attention (2.7); mutually exclusive with Q, K, V.
    noise : float >= 0
        ν: adds ν·Δ_S ρ to the PDE and sqrt(2ν)·dB (Stratonovich, projected) to particles (docs/mathematics.md §6).
    mask : "none", "causal" or "causal-strict"
        Which tokens token j attends to: all of them, k <= j (decoder attention), or k < j (the
        kinetic paper's particles; the first token then stays fixed). docs/causal.md.
    position_bias : float >= 0, or a sequence of one per head
        λ, the ALiBi slope in units of the whole sequence: the pair (j, k) gets the weight
        e^{−λ(j−k)/n} (masked models only). With ``heads``, a list gives head h its own slope λ_h
        (ALiBi's geometric slopes over heads); ``model.position_biases`` is the tuple of the H slopes and
        ``model.position_bias`` their common value, or that tuple when they differ. A head's own β is
        a multiple of its query: the head (c·I, I, V) has the kernel e^{cβ⟨x, y⟩} (`head_models`).
    normalization : "post", "pre", "mix", "peri", "ngpt" or "sqrt-depth"
        Where the layer normalisation sits: a speed factor on each token's direction
        (docs/normalization.md). "post" is the paper's model.
    mix_depth : float > 0
        τ of ``normalization="mix"``: Post-LN for t <= τ, Pre-LN after.
    ngpt_alpha : float > 0 or callable t -> float
        α(t) of ``normalization="ngpt"`` (default 1).
    mlp : (W, U, b), optional
        A feed-forward term P_x W act(U x + b) added to the velocity: W (d, w), U (w, d), b (w,);
        ``model.feedforward`` is its `meanfield.transformer.feedforward.FeedForward` (value, divergence), None without.
    activation : "gelu", "tanh" or "relu"
        The feed-forward activation (GELU in its exact erf form).
    attention : "softmax", "hardmax", "sinkhorn" or "l2"
        How the weights of the attention matrix are normalised: softmax rows (the paper's (2.3)),
        the limit β → ∞ of softmax ((9.5)–(9.6): each token moves to the mean of its argmax set),
        Sinkhorn's doubly stochastic matrix (Sander et al. 2022), or L2 attention's
        e^{−(β/2)‖Qx − Ky‖²} rows (Kim et al. 2021). docs/attention.md says which solver takes which.
        "sinkhorn" refuses a mask (a lower-triangular doubly stochastic matrix is the identity).
    sinkhorn_eps : float > 0
        ε of ``attention="sinkhorn"``, the entropic parameter: the plan is the entropic transport of
        μ to itself for the gain β⟨Qx, Ky⟩ regularised by ε, of kernel e^{β⟨Qx, Ky⟩/ε} (default 1:
        softmax's kernel, whose first Sinkhorn row update is softmax attention; docs/attention.md).
    sinkhorn_tol : float > 0
        The tolerance of the Sinkhorn iterations on the marginals: the rows of the attention matrix
        sum to 1 to rounding and its columns to within about ``sinkhorn_tol`` (default 1e-12).
    schedule : `meanfield.transformer.schedule.Schedule` (or a dict {"times": ..., "pieces": ...}), optional
        Parameters that change with depth: piece k sets any of β, Q, K, V, heads and the MLP on
        [t_k, t_{k+1}) (docs/schedule.md). ``model.piece(k)`` is the model of piece k; the model's
        own values are those a piece leaves out.

    Raises
    ------
    ValueError
        Naming the argument: ``dim`` < 2, a non-finite ``beta``, ``noise`` < 0, matrices of the wrong
        shape or with NaN/inf, ``heads`` together with ``Q``/``K``/``V``, ``position_bias`` without a
        mask, an unknown ``mask``, ``normalization`` or ``activation``, ``mix_depth`` or
        ``ngpt_alpha`` with another normalisation.

    Notes
    -----
    ``is_zonal`` is True when there is one head with Q^T K = I and V = v·I: the interaction then
    depends on ⟨x, y⟩ only, which is the case the PDE solvers accept.

    Examples
    --------
    >>> import numpy as np
    >>> import meanfield as mf
    >>> model = mf.Model(beta=4.0, dim=3)
    >>> model.is_zonal, model.kind
    (True, 'SA')
    >>> mf.Model(beta=1.0, dim=3, Q=np.diag([1.0, 2.0, 3.0])).is_zonal
    False
    >>> mf.Model(beta=1.0, dim=1)
    Traceback (most recent call last):
    ...
    meanfield.errors.InvalidInput: `dim` must be >= 2, got 1.
    """

    def __init__(self, beta, dim, normalized=True, V=1.0, Q=None, K=None, heads=None, noise=0.0, *, mask="none",
                 position_bias=0.0, normalization="post", mix_depth=None, ngpt_alpha=None, mlp=None,
                 activation="gelu", schedule=None, attention="softmax", sinkhorn_eps=1.0, sinkhorn_tol=1e-12):
        self.beta = check_beta(beta)
        self.dim = check_dim(dim)
        check_memory(24 * self.dim ** 2, "dim", self.dim)      # the d×d matrices Q, K, V of a head
        if not isinstance(normalized, (bool, np.bool_)):
            raise InvalidInput(f"`normalized` must be True (SA) or False (USA), got {normalized!r}.")
        self.normalized = bool(normalized)
        self.noise = check_real(noise, "noise", low=0.0)
        if heads is not None:
            if Q is not None or K is not None or not (np.isscalar(V) and float(V) == 1.0):
                raise InvalidInput("`heads` cannot be combined with `Q`, `K` or `V`; put them in each head.")
            if len(heads) < 1:
                raise InvalidInput("`heads` must be a non-empty list of (Q, K, V) triples.")
            self.heads = [self._head(h, i) for i, h in enumerate(heads)]
        else:
            self.heads = [self._head((Q, K, V), None)]
        self.mask = _choice(mask, "mask", MASKS)
        self._set_attention(attention, sinkhorn_eps, sinkhorn_tol)
        self.position_biases = _check_slopes(position_bias, len(self.heads))
        self.position_bias = (self.position_biases[0] if len(set(self.position_biases)) == 1
                              else self.position_biases)
        if any(self.position_biases) and self.mask == "none":
            raise InvalidInput("`position_bias` (the ALiBi slope) applies to a masked model: pass mask='causal' or "
                             f"'causal-strict' with it, got mask='none' and position_bias={position_bias!r}.")
        self._set_normalization(normalization, mix_depth, ngpt_alpha)
        self.activation = _choice(activation, "activation", ACTIVATIONS)
        self.mlp = None if mlp is None else check_mlp(mlp, self.dim)
        sets_mlp = schedule is not None and any("mlp" in p for p in (
            schedule if isinstance(schedule, Schedule) else Schedule.from_dict(schedule)).pieces)
        if self.mlp is None and self.activation != ACTIVATIONS[0] and not sets_mlp:
            raise InvalidInput(f"`activation`={self.activation!r} is the activation of the feed-forward term, and the "
                               "model has none (`mlp` is None; it would be dropped): give `mlp`=(W, U, b) with it. "
                               f"A feed-forward term given to Particles.solve takes the model's activation, so for "
                               f"another than {ACTIVATIONS[0]!r} give the model an `mlp` too.")
        self.feedforward = None if mlp is None else FeedForward(*self.mlp, self.activation)
        self.scheduled = None                  # a piece's model: the scheduled model it belongs to
        self.schedule, self._pieces = None, ()
        if schedule is not None:
            self.schedule = schedule if isinstance(schedule, Schedule) else Schedule.from_dict(schedule)
            self._pieces = tuple(self._piece_model(k, p) for k, p in enumerate(self.schedule.pieces))

    def _set_attention(self, attention, sinkhorn_eps, sinkhorn_tol):
        """The normalisation of the attention weights (ValueError naming `attention`, `sinkhorn_eps`,
        `sinkhorn_tol`)."""
        self.attention = _choice(attention, "attention", ATTENTIONS)
        self.sinkhorn_eps = check_real(sinkhorn_eps, "sinkhorn_eps", low=0.0, low_open=True)
        self.sinkhorn_tol = check_real(sinkhorn_tol, "sinkhorn_tol", low=0.0, low_open=True)
        if self.attention == "sinkhorn" and self.mask != "none":
            raise InvalidInput(f"`attention`='sinkhorn' with `mask`={self.mask!r}: a doubly stochastic matrix that is "
                               "lower triangular is the identity (with equal weights), so Sinkhorn attention under a "
                               "causal mask leaves every token in place; use mask='none' (docs/attention.md).")

    def _piece_model(self, k, piece):
        """The model of piece k: this one's values, with those the piece sets (ValueError naming `schedule`)."""
        kw = dict(beta=self.beta, dim=self.dim, normalized=self.normalized, noise=self.noise, mask=self.mask,
                  attention=self.attention, sinkhorn_eps=self.sinkhorn_eps, sinkhorn_tol=self.sinkhorn_tol,
                  position_bias=self.position_bias, normalization=self.normalization, mix_depth=self.mix_depth,
                  ngpt_alpha=self.ngpt_alpha, mlp=self.mlp, activation=self.activation)
        piece = dict(piece)
        heads = piece.pop("heads", None)
        own = {name: piece.pop(name) for name in ("Q", "K", "V") if name in piece}
        if heads is not None and own:
            raise InvalidInput(f"`schedule` piece {k} sets both `heads` and {sorted(own)}; put them in the heads.")
        if heads is None and own and len(self.heads) > 1:
            raise InvalidInput(f"`schedule` piece {k} sets {sorted(own)} of a model with {len(self.heads)} heads; "
                             "set `heads` instead.")
        if heads is None:
            Q, K, V = self.heads[0]
            heads = [(own.get("Q", Q), own.get("K", K), own.get("V", V))] if own else self.heads
        kw.update(piece)
        if kw["mlp"] is None:                    # no feed-forward term in this piece: no activation either
            kw["activation"] = ACTIVATIONS[0]
        try:
            model = Model(heads=[tuple(h) for h in heads], **kw)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"`schedule` piece {k}: {exc}") from None
        model.scheduled = self
        return model

    def piece(self, k):
        """The model of piece k of the schedule (this model itself without a schedule)."""
        return self if self.schedule is None else self._pieces[k]

    @property
    def source(self):
        """The model with the schedule that this piece comes from, or this model."""
        return self if self.scheduled is None else self.scheduled

    def _set_normalization(self, normalization, mix_depth, ngpt_alpha):
        self.normalization = _choice(normalization, "normalization", NORMALIZATIONS)
        if mix_depth is not None and self.normalization != "mix":
            raise InvalidInput(f"`mix_depth` applies to normalization='mix', got normalization={self.normalization!r}.")
        if ngpt_alpha is not None and self.normalization != "ngpt":
            raise InvalidInput(f"`ngpt_alpha` applies to normalization='ngpt', got normalization={self.normalization!r}.")
        if self.normalization == "mix":
            if mix_depth is None:
                raise InvalidInput("`mix_depth` (τ: Post-LN for t <= τ, Pre-LN after) is required with normalization='mix'.")
            mix_depth = check_real(mix_depth, "mix_depth", low=0.0, low_open=True)
        self.mix_depth = mix_depth
        if self.normalization == "ngpt":
            if ngpt_alpha is None:
                ngpt_alpha = 1.0
            if not callable(ngpt_alpha):
                ngpt_alpha = check_real(ngpt_alpha, "ngpt_alpha", low=0.0, low_open=True)
        self.ngpt_alpha = ngpt_alpha

    def _head(self, head, index):
        d = self.dim
        where = "" if index is None else f"heads[{index}]."
        try:
            Q, K, V = head
        except (TypeError, ValueError):
            raise InvalidInput(f"`heads[{index}]` must be a triple (Q, K, V).") from None
        if Q is None or K is None:                     # one read-only identity for both (d² doubles each)
            eye = np.eye(d)
            eye.flags.writeable = False
        Q = eye if Q is None else _as_matrix(Q, f"{where}Q", cols=d)
        K = eye if K is None else _as_matrix(K, f"{where}K", cols=d)
        if Q.shape[0] != K.shape[0]:
            raise InvalidInput(f"`{where}Q` and `{where}K` must have the same number of rows (m x {d}), "
                             f"got {Q.shape} and {K.shape}.")
        if np.isscalar(V) or np.ndim(V) == 0:
            V = check_real(V, f"{where}V") * np.eye(d)
        else:
            V = _as_matrix(V, f"{where}V", rows=d, cols=d)
        return Q, K, V

    # -- derived, read-only views ------------------------------------------------------------
    @property
    def Q(self):
        return self.heads[0][0]

    @property
    def K(self):
        return self.heads[0][1]

    @property
    def V(self):
        return self.heads[0][2]

    @property
    def is_zonal(self):
        """One head, Q^T K = I and V = v·I (docs/mathematics.md §2): the PDE solvers' case.

        Returns
        -------
        bool
            True when the interaction e^{β⟨Qx, Ky⟩} V depends on ⟨x, y⟩ only.

        Examples
        --------
        >>> import meanfield as mf
        >>> mf.Model(beta=1.0, dim=2, V=-1.0).is_zonal
        True
        >>> mf.Model(beta=1.0, dim=2, heads=[(None, None, 1.0), (None, None, 1.0)]).is_zonal
        False
        """
        if len(self.heads) != 1:
            return False
        Q, K, V = self.heads[0]
        if not _scaled_identity(V, V[0, 0]):
            return False
        if _scaled_identity(Q, 1.0) and _scaled_identity(K, 1.0):     # the default heads: no d^3 product
            return True
        return bool(np.allclose(Q.T @ K, np.eye(self.dim), rtol=0, atol=_ZONAL_TOL))

    @functools.cached_property
    def head_models(self):
        """One single-head zonal `Model` per head when every head is zonal with its own β (Q_hᵀK_h = c_h·I,
        V_h = v_h·I: the model of head h has β_h = c_h·β, V = v_h and the slope λ_h), else None. The
        field of the model is the sum of those of the head models (docs/causal.md, several heads). Made
        once per model (a right-hand side asks for them every time)."""
        out = []
        for h, (Q, K, V) in enumerate(self.heads):
            if not _scaled_identity(V, V[0, 0]):
                return None
            M = Q.T @ K if not (_scaled_identity(Q, 1.0) and _scaled_identity(K, 1.0)) else np.eye(self.dim)
            c = float(M[0, 0])
            if not _scaled_identity(M, c):
                return None
            out.append(Model(c * self.beta, self.dim, self.normalized, V=float(V[0, 0]), noise=self.noise,
                             mask=self.mask, position_bias=self.position_biases[h], normalization=self.normalization,
                             mix_depth=self.mix_depth, ngpt_alpha=self.ngpt_alpha))
        return tuple(out)

    @property
    def v(self):
        """The scalar v of V = v·I (the sign s = v of docs/mathematics.md §1); ValueError if V is not a multiple of I."""
        V = self.V
        if len(self.heads) != 1 or not _scaled_identity(V, V[0, 0]):
            raise InvalidInput("`V` is not a scalar multiple of the identity, so the model has no scalar v.")
        return float(V[0, 0])

    @property
    def kind(self):
        return "SA" if self.normalized else "USA"

    @property
    def is_causal(self):
        """A masked model: token j attends to k <= j ("causal") or k < j ("causal-strict")."""
        return self.mask != "none"

    @property
    def is_layer_standard(self):
        """The paper's layer: no mask, Post-LN, no feed-forward term."""
        return self.mask == "none" and self.normalization == "post" and self.mlp is None

    def __repr__(self):
        parts = [f"beta={self.beta:g}", f"dim={self.dim}"]
        if not self.normalized:
            parts.append("normalized=False")
        if self.is_zonal:
            if self.v != 1.0:
                parts.append(f"V={self.v:g}")
        else:
            parts.append(f"heads={len(self.heads)} (general Q, K, V)")
        if self.noise:
            parts.append(f"noise={self.noise:g}")
        parts += [f"{k}={v!r}" for k, v in self._layer_dict().items() if k not in ("mlp", "schedule")]
        if self.schedule is not None:
            parts.append(f"schedule={len(self.schedule)} pieces")
        if self.mlp is not None:
            parts.append(f"mlp=width {self.mlp[0].shape[1]}")
        return f"Model({', '.join(parts)})"

    def __eq__(self, other):
        if not isinstance(other, Model):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    # -- serialisation (NetCDF attributes) ------------------------------------------------------
    def to_dict(self):
        """Plain JSON-able description; `Model.from_dict` inverts it exactly."""
        out = {"beta": self.beta, "dim": self.dim, "normalized": self.normalized, "noise": self.noise}
        if self.is_zonal:
            out["V"] = self.v
        else:
            out["heads"] = [[Q.tolist(), K.tolist(), V.tolist()] for Q, K, V in self.heads]
        out.update(self._layer_dict())
        return out

    def _layer_dict(self):
        """The keys beyond the paper's layer, only where they differ from the default."""
        out = {}
        if self.mask != "none":
            out["mask"] = self.mask
        if self.attention != "softmax":
            out["attention"] = self.attention
        if self.attention == "sinkhorn":
            out["sinkhorn_eps"], out["sinkhorn_tol"] = self.sinkhorn_eps, self.sinkhorn_tol
        if any(self.position_biases):
            out["position_bias"] = (list(self.position_biases) if isinstance(self.position_bias, tuple)
                                    else self.position_bias)
        if self.normalization != "post":
            out["normalization"] = self.normalization
        if self.mix_depth is not None:
            out["mix_depth"] = self.mix_depth
        if self.ngpt_alpha is not None:
            out["ngpt_alpha"] = self.ngpt_alpha if not callable(self.ngpt_alpha) else "callable"
        if self.mlp is not None:
            out["mlp"] = [a.tolist() for a in self.mlp]
            out["activation"] = self.activation
        if self.schedule is not None:
            out["schedule"] = self.schedule.to_dict()
        return out

    @classmethod
    def from_dict(cls, d):
        d = dict(d)
        if d.get("ngpt_alpha") == "callable":
            raise InvalidInput("`ngpt_alpha` was a function of t, which a file cannot hold; build the Model again with "
                             "it and continue the run from the saved Solution's state.")
        heads = d.pop("heads", None)
        if heads is not None:
            heads = [tuple(np.asarray(m, dtype=float) for m in h) for h in heads]
            return cls(heads=heads, **d)
        return cls(**d)

    def to_attrs(self):
        """Attributes for an xarray/NetCDF file (scalars plus a JSON copy for exact round trips)."""
        attrs = {"model_beta": self.beta, "model_dim": self.dim, "model_kind": self.kind,
                 "model_noise": self.noise, "model_json": json.dumps(self.to_dict())}
        if self.is_zonal:
            attrs["model_V"] = self.v
        return attrs

    @classmethod
    def from_attrs(cls, attrs):
        return cls.from_dict(json.loads(attrs["model_json"]))
