"""`Segments`: one run whose saved times are covered by consecutive segments in different representations.

A spectral run that stops resolving the density as it clusters can hand over to the characteristics
(`solvers.Lagrangian`, docs/lagrangian.md) and continue from its last state: the saved times before the
hand-over are spectral coefficients, the ones after are moving nodes. Neither can be carried into
the other without loss (a spectral series cannot hold an exponentially sharp cluster; nodes started
at the hand-over have no positions before it), so the `Solution` keeps both, each slice in its own
representation.

One saved slice is a `Piece` (the index of its segment and the slice in that segment's layout);
``Solution.data`` is the object array of the pieces. ``density(x, i)``, ``measure(i)``, ``energy``,
``mass``, ``state(i)`` dispatch to the representation of the segment that holds saved index i, and
``Solution.segments`` returns one plain `Solution` per segment.

NetCDF layout (one file, readable by xarray): the variables, dimensions, coordinates and attributes
of segment k are those of its own representation prefixed with ``segment<k>__``; its time axis is
``segment<k>__time``, whose coordinate holds the run's saved indices of that segment (so
``ds.time[ds.segment1__time]`` are its times). Attribute ``segments`` is the number of segments and
``segment<k>__solver`` the solver that computed it.
"""
import numpy as np

from ..spaces.gridded import TIME_ATTRS
from .base import Representation, lookup_representation
from ..errors import InvalidInput

_SEP = "__"


class Piece:
    """One saved slice of a segmented run: ``segment`` (index) and ``data`` (that segment's slice)."""

    __slots__ = ("segment", "data")

    def __init__(self, segment, data):
        self.segment = int(segment)
        self.data = data

    def __repr__(self):
        return f"Piece(segment={self.segment}, shape={np.shape(self.data)})"


def _prefix(k):
    return f"segment{k}{_SEP}"


class Segments(Representation):
    """The representations of consecutive segments of one run (module docstring).

    Parameters
    ----------
    representations : sequence of `Representation`, one per segment, in time order (same ``dim``).
    solvers : sequence of str, the solver of each segment (for ``Solution.segments`` and the file).
    """

    name = "segments"

    def resolution_label(self, data=None):
        """The segments' labels joined by arrows, a last part that all share (", M = 16 positions") once."""
        labels = [r.resolution_label() for r in self.representations]
        cut = labels[0].rfind(", ")
        tail = labels[0][cut:] if cut >= 0 else ""
        if tail and all(label.endswith(tail) for label in labels):
            return " → ".join(label[:-len(tail)] for label in labels) + tail
        return " → ".join(labels)

    def __init__(self, representations, solvers=None):
        self.representations = tuple(representations)
        if len(self.representations) < 2:
            raise InvalidInput("`representations` must hold at least two segments.")
        dims = {r.dim for r in self.representations}
        if len(dims) != 1:
            raise InvalidInput(f"`representations` must live on one sphere, got dims {sorted(dims)}.")
        self.dim = dims.pop()
        self.solvers = tuple(str(s) for s in (solvers or [""] * len(self.representations)))
        if len(self.solvers) != len(self.representations):
            raise InvalidInput("`solvers` must name one solver per segment.")
        self.is_density = all(r.is_density for r in self.representations)
        self.layered = all(r.layered for r in self.representations)
        if self.layered:                # a masked run's segments: the last one's position nodes
            self.positions = self.representations[-1].positions

    @classmethod
    def join(cls, representations, datas, solvers=None):
        """(Segments, object array of `Piece`) for the stacked slices ``datas[k]`` of segment k."""
        rep = cls(representations, solvers)
        pieces = [Piece(k, a) for k, data in enumerate(datas) for a in data]
        out = np.empty(len(pieces), dtype=object)
        out[:] = pieces
        return rep, out

    # -- dispatch -------------------------------------------------------------------------------------
    def segment_of(self, data_all):
        """The segment index of every slice of ``data_all`` (an object array of pieces)."""
        return np.array([p.segment for p in data_all], dtype=int)

    def stack(self, data_all, k):
        """The slices of segment k in ``data_all``, stacked in that segment's layout."""
        return np.stack([np.asarray(p.data) for p in data_all if p.segment == k])

    def _piece(self, data):
        if not isinstance(data, Piece):
            raise InvalidInput(f"a segmented Solution's slice is a Piece (segment, data), got {type(data).__name__}.")
        return self.representations[data.segment], data.data

    def evaluate(self, data, x, **kwargs):
        rep, a = self._piece(data)
        return rep.evaluate(a, x, **kwargs)

    def mass(self, data, **kwargs):
        rep, a = self._piece(data)
        return rep.mass(a, **kwargs)

    def energy(self, beta, data, **kwargs):
        rep, a = self._piece(data)
        return rep.energy(beta, a, **kwargs)

    def position_map(self, data, *args, **kwargs):
        """ρ over (position, angle) of a layered segment (`LayeredDensity.position_map`)."""
        rep, a = self._piece(data)
        return rep.position_map(a, *args, **kwargs)

    def measure(self, data, n=None, **kwargs):
        rep, a = self._piece(data)
        return rep.measure(a, n=n, **kwargs)

    def power(self, data):
        rep, a = self._piece(data)
        return rep.power(a)

    def to_grid(self, data, n=None):
        rep, a = self._piece(data)
        return rep.to_grid(a, n)

    def cells(self, n=None):
        """The first segment's cell grid (every segment's cell means are taken on it)."""
        return self.representations[0].cells(n)

    def cell_means(self, data, grid):
        rep, a = self._piece(data)
        return rep.cell_means(a, grid)

    def embed(self, data_all, source):
        if source is not self:
            raise InvalidInput("segmented data are joined by meanfield.results.solution.concat, not embedded.")
        return data_all

    def split(self, sol):
        """One plain `Solution` per segment of ``sol`` (its saved times, data, diagnostics, energy)."""
        Solution = type(sol)
        seg = self.segment_of(sol.data)
        out = []
        for k, rep in enumerate(self.representations):
            idx = np.nonzero(seg == k)[0]
            diags = sol.diagnostics_at(idx)
            last = k == len(self.representations) - 1
            status, message = (sol.status, sol.message) if last else (
                1, f"continued by {self.solvers[k + 1] or 'the next segment'} from t={sol.t[idx[-1]]:.6g}")
            out.append(Solution(sol.t[idx], sol.model, rep, self.stack(sol.data[idx], k), diags, sol.stats,
                                status, message, self.solvers[k], None if sol.tracers is None else sol.tracers[idx]))
        return out

    # -- I/O ------------------------------------------------------------------------------------------
    def to_dataset(self, data_all, times=None):
        """Each segment's variables, coordinates and attributes with the prefix ``segmentK__`` (the
        segment's own dimensions prefixed too, so a coordinate such as ``segment0__position`` stays a
        coordinate); ``segmentK__time`` the model times t of its saved states (``times`` (T,), the
        run's; without them the indices) and ``segmentK__time_index`` their indices among the run's."""
        seg = self.segment_of(data_all)
        data_vars, coords, attrs = {}, {}, {"representation": self.name, "segments": len(self.representations),
                                            "dim": self.dim}
        for k, rep in enumerate(self.representations):
            pre = _prefix(k)
            dv, co, at = rep.to_dataset(self.stack(data_all, k))
            for name, (dims, values) in dv.items():
                data_vars[pre + name] = (tuple(pre + d for d in dims), values)
            for name, values in co.items():
                if isinstance(values, tuple):          # (dims, values[, attrs]): on the segment's own dimension
                    dims = (values[0],) if isinstance(values[0], str) else tuple(values[0])
                    values = (tuple(pre + d for d in dims),) + tuple(values[1:])
                coords[pre + name] = values
            index = np.nonzero(seg == k)[0]
            data_vars[pre + "time_index"] = ((pre + "time",), index, {
                "long_name": f"index among the run's saved times of the saved states of segment {k}", "units": "1"})
            coords[pre + "time"] = (pre + "time", index if times is None else np.asarray(times, dtype=float)[index],
                                    dict(TIME_ATTRS, long_name=f"{TIME_ATTRS['long_name']} of the saved states of "
                                                               f"segment {k}"))
            attrs.update({pre + key: value for key, value in at.items()})
            attrs[pre + "solver"] = self.solvers[k]
        return data_vars, coords, attrs

    @classmethod
    def from_dataset(cls, ds):
        import xarray as xr  # deferred: xarray is heavy

        count = int(ds.attrs["segments"])
        reps, solvers, pieces = [], [], {}
        for k in range(count):
            pre = _prefix(k)

            def strip(name):
                return name[len(pre):]

            names = [v for v in ds.data_vars if v.startswith(pre) and v != pre + "time_index"]
            sub = xr.Dataset({strip(v): (tuple(strip(d) for d in ds[v].dims), ds[v].values) for v in names},
                             coords={strip(c): ds[c].values for c in ds.coords
                                     if c.startswith(pre) and c != pre + "time"})
            sub.attrs.update({strip(a): v for a, v in ds.attrs.items() if a.startswith(pre)})
            rep, data = lookup_representation(sub.attrs["representation"]).from_dataset(sub)
            reps.append(rep)
            solvers.append(str(sub.attrs.get("solver", "")))
            index = ds[pre + "time_index"] if pre + "time_index" in ds else ds[pre + "time"]    # older files: indices
            for i, a in zip(np.asarray(index.values, dtype=int), data):
                pieces[int(i)] = Piece(k, a)
        out = np.empty(len(pieces), dtype=object)
        out[:] = [pieces[i] for i in range(len(pieces))]
        return cls(reps, solvers), out


__all__ = ["Segments", "Piece"]
