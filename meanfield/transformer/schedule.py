"""Parameters that change with depth: piecewise constant in t (docs/mathematics.md §16, docs/schedule.md).

The paper's layer keeps the same Q, K, V at every depth. Geshkovski, Rigollet and Ruiz-Balet
(*Measure-to-measure interpolation using Transformers*, arXiv 2411.04551) steer a measure with
parameters that are piecewise constant in time: on [t_k, t_{k+1}) the dynamics is the model's with the
parameters of piece k,

    ẋ_j = P_{x_j}(Σ_h A_h[β_k, Q_k, K_k, V_k](x_j) + F_k(x_j)),

and the pieces join continuously (the state at t_k ends piece k − 1 and starts piece k). A
`Schedule` holds the times t_k and, for each piece, the parameters it sets among ``PIECE_KEYS``
(any left out are the model's). ``Model(..., schedule=S)`` owns it: ``model.piece(k)`` is the model
of piece k, and every solver that takes it (``takes_schedule``) integrates each piece with that
model, its steps cut at the t_k.
"""
import numpy as np

from ..serialization import jsonable
from ..validation import check_real
from ..errors import InvalidInput

PIECE_KEYS = ("beta", "Q", "K", "V", "heads", "mlp")
_INDEX_TOL = 1e-9        # t within 1e-9·max(1, |t_k|) of t_k (a sum of steps) is in piece k


class Schedule:
    """Piecewise-constant parameters: ``pieces[k]`` for t in [times[k], times[k + 1]), the last one
    from ``times[-1]`` on (and the first one before ``times[0]``).

    Parameters
    ----------
    times : increasing sequence of finite numbers >= 0, one per piece: where each piece starts.
    pieces : sequence of dicts, one per time, with keys among ``PIECE_KEYS`` ("beta", "Q", "K", "V",
        "heads", "mlp"): the model's keywords that the piece sets (arrays as nested lists or arrays).

    Raises
    ------
    ValueError
        Times not finite, negative or not increasing; not one piece per time; a key outside
        ``PIECE_KEYS`` (each message names `schedule`).

    Examples
    --------
    >>> import meanfield as mf
    >>> schedule = mf.Schedule([0.0, 1.0], [{"beta": 1.0}, {"beta": 4.0}])
    >>> len(schedule), schedule.index(0.5), schedule.index(1.0), schedule.breakpoints(0.0, 2.0).tolist()
    (2, 0, 1, [1.0])
    >>> model = mf.Model(beta=1.0, dim=2, schedule=schedule)
    >>> model.piece(0).beta, model.piece(1).beta
    (1.0, 4.0)
    """

    def __init__(self, times, pieces):
        try:
            t = np.array(times, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise InvalidInput("`schedule` times must be a sequence of numbers.") from None
        if t.size == 0 or not np.all(np.isfinite(t)) or np.any(t < 0):
            raise InvalidInput(f"`schedule` times must be finite numbers >= 0, at least one, got {[float(v) for v in t]}.")
        if np.any(np.diff(t) <= 0):
            raise InvalidInput(f"`schedule` times must increase strictly, got {[float(v) for v in t]}.")
        try:
            pieces = [dict(p) for p in pieces]
        except (TypeError, ValueError):
            raise InvalidInput("`schedule` pieces must be a sequence of dicts of parameters.") from None
        if len(pieces) != t.size:
            raise InvalidInput(f"`schedule` needs one piece per time: {t.size} times, {len(pieces)} pieces.")
        for k, piece in enumerate(pieces):
            unknown = sorted(set(piece) - set(PIECE_KEYS))
            if unknown:
                raise InvalidInput(f"`schedule` piece {k} sets {unknown}; a piece sets keys among {list(PIECE_KEYS)}.")
        t.flags.writeable = False
        self.times, self.pieces = t, pieces

    def __len__(self):
        return self.times.size

    def index(self, t):
        """k with t in [times[k], times[k + 1]) (t within 1e-9 of times[k] counts as times[k])."""
        t = check_real(t, "t")
        k = int(np.searchsorted(self.times, t + _INDEX_TOL * max(1.0, abs(t)), side="right")) - 1
        return min(max(k, 0), self.times.size - 1)

    def breakpoints(self, start, end):
        """The times[k] strictly inside (start, end) (beyond 1e-9 of both): where a run changes piece."""
        tol = _INDEX_TOL * max(1.0, abs(start), abs(end))
        return self.times[(self.times > start + tol) & (self.times < end - tol)]

    def to_dict(self):
        """Plain JSON-able description (arrays and tuples as nested lists, numpy scalars as Python
        numbers; `meanfield.serialization.jsonable`); `Schedule.from_dict` inverts it exactly."""
        return jsonable({"times": self.times, "pieces": self.pieces})

    @classmethod
    def from_dict(cls, d):
        try:
            return cls(d["times"], d["pieces"])
        except (KeyError, TypeError):
            raise InvalidInput("`schedule` must be a Schedule or a table {times = [...], pieces = [{...}, ...]}.") from None

    def __eq__(self, other):
        return isinstance(other, Schedule) and self.to_dict() == other.to_dict()

    def __repr__(self):
        keys = sorted(set().union(*self.pieces))
        return f"Schedule({len(self)} pieces at t = {', '.join(f'{t:g}' for t in self.times)}; setting {keys})"
