"""The model: which self-attention dynamics on S^{d-1} ((2.3)–(2.7), (3.2); docs/mathematics.md §1–§2, §6)."""
import json

import numpy as np

from .validation import check_beta, check_dim, check_memory, check_real

_ZONAL_TOL = 1e-12


def _as_matrix(value, name, rows=None, cols=None):
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a real matrix.") from None
    if a.ndim != 2:
        raise ValueError(f"`{name}` must be a 2-D matrix, got shape {a.shape}.")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"`{name}` contains NaN or inf.")
    if rows is not None and a.shape[0] != rows:
        raise ValueError(f"`{name}` must have {rows} rows, got shape {a.shape}.")
    if cols is not None and a.shape[1] != cols:
        raise ValueError(f"`{name}` must have {cols} columns, got shape {a.shape}.")
    return a


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

    Notes
    -----
    ``is_zonal`` is True when there is one head with Q^T K = I and V = v·I: the interaction then
    depends on ⟨x, y⟩ only, which is the case the PDE solvers accept.
    """

    def __init__(self, beta, dim, normalized=True, V=1.0, Q=None, K=None, heads=None, noise=0.0):
        self.beta = check_beta(beta)
        self.dim = check_dim(dim)
        check_memory(24 * self.dim ** 2, "dim", self.dim)      # the d×d matrices Q, K, V of a head
        if not isinstance(normalized, (bool, np.bool_)):
            raise ValueError(f"`normalized` must be True (SA) or False (USA), got {normalized!r}.")
        self.normalized = bool(normalized)
        self.noise = check_real(noise, "noise", low=0.0)
        if heads is not None:
            if Q is not None or K is not None or not (np.isscalar(V) and float(V) == 1.0):
                raise ValueError("`heads` cannot be combined with `Q`, `K` or `V`; put them in each head.")
            if len(heads) < 1:
                raise ValueError("`heads` must be a non-empty list of (Q, K, V) triples.")
            self.heads = [self._head(h, i) for i, h in enumerate(heads)]
        else:
            self.heads = [self._head((Q, K, V), None)]

    def _head(self, head, index):
        d = self.dim
        where = "" if index is None else f"heads[{index}]."
        try:
            Q, K, V = head
        except (TypeError, ValueError):
            raise ValueError(f"`heads[{index}]` must be a triple (Q, K, V).") from None
        if Q is None or K is None:                     # one read-only identity for both (d² doubles each)
            eye = np.eye(d)
            eye.flags.writeable = False
        Q = eye if Q is None else _as_matrix(Q, f"{where}Q", cols=d)
        K = eye if K is None else _as_matrix(K, f"{where}K", cols=d)
        if Q.shape[0] != K.shape[0]:
            raise ValueError(f"`{where}Q` and `{where}K` must have the same number of rows (m x {d}), "
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
        """One head, Q^T K = I and V = v·I (docs/mathematics.md §2): the PDE solvers' case."""
        if len(self.heads) != 1:
            return False
        Q, K, V = self.heads[0]
        if not _scaled_identity(V, V[0, 0]):
            return False
        if _scaled_identity(Q, 1.0) and _scaled_identity(K, 1.0):     # the default heads: no d^3 product
            return True
        return bool(np.allclose(Q.T @ K, np.eye(self.dim), rtol=0, atol=_ZONAL_TOL))

    @property
    def v(self):
        """The scalar v of V = v·I (the sign s = v of docs/mathematics.md §1); ValueError if V is not a multiple of I."""
        V = self.V
        if len(self.heads) != 1 or not _scaled_identity(V, V[0, 0]):
            raise ValueError("`V` is not a scalar multiple of the identity, so the model has no scalar v.")
        return float(V[0, 0])

    @property
    def kind(self):
        return "SA" if self.normalized else "USA"

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
        return out

    @classmethod
    def from_dict(cls, d):
        d = dict(d)
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
