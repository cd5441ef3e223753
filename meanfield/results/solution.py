"""`Solution`: the one result type of every solver (the public contract), with xarray/NetCDF I/O
(`meanfield.results.netcdf.SolutionFiles`, mixed in).

Like scipy's ``OdeResult`` it is plain: saved times ``t``, the state at each saved time (through a
`Representation`, which carries its normalisation), per-time diagnostics, counters and a status.
Derived quantities (energy, mass) are computed from the state, not stored twice.
"""
import numpy as np

from .._docs import doc_params
from ..validation import check_points
from ..transformer.model import Model
from ..representations import State
from ..observables.diagnostics import follow_clusters
from .plotting import plot_solution
from ..representations.segments import Segments
from .netcdf import SolutionFiles
from .movies import animate
from ..errors import InvalidInput


FLOW_MAPS = []      # the function that re-runs a Solution with tracers (`register_flow_map`)


def register_flow_map(flow_map):
    """Register ``flow_map(solution, points, last, **options)`` -> (last + 1, m, d), the re-run with
    tracers behind `Solution.flow` (the solvers package registers `solvers.tracers.flow_map`: this
    package imports no solver)."""
    FLOW_MAPS.append(flow_map)


@doc_params
class Solution(SolutionFiles):
    """Result of a run: the one result type of every solver.

    Solvers build it (``solver.solve``); `meanfield.load` reads a saved one back.

    Parameters
    ----------
    t : (T,) array
        Saved times (layer depth t >= 0), strictly increasing.
    model : Model
        The model that was run.
    representation : Representation
        How ``data`` is to be read.
    data : (T, ...) array
        The state at each saved time, in the representation's layout.
    diagnostics : dict, optional
        name -> array of shape (T, ...); an ``"energy"`` entry is taken as E_β at the saved times.
    stats : dict, optional
        Counters of the run.
    status : int
        0 finished, 1 stopped early.
    message : str
        Why the run stopped.
    solver : str
        The name of the solver that made it.
    tracers : (T, m, d) array, optional
        Passive tracers at each saved time.

    Attributes
    ----------
    t : (T,) array
        Saved times.
    model : Model
        The model.
    representation : Representation
        How ``data`` is to be read.
    data : (T, ...) array
        The state at each saved time (for a run in several representations, an object array of
        `representations.segments.Piece`; see ``segments``).
    diagnostics : dict
        name -> (T,) array (min density, spectral tail, dissipation identity, W1 ...).
    stats : dict
        Counters (nfev, nsteps, nrejected, wall time ...).
    status : int
        0 finished, 1 stopped early (see ``message``).
    tracers : (T, m, d) array or None
        The passive tracers of a run started with ``tracers=`` at each saved time (the flow map of
        the run applied to their starts, docs/tracers.md), else None.

    Raises
    ------
    ValueError
        ``model`` not a `Model`, ``data`` or ``tracers`` without one slice per saved time.

    Examples
    --------
    {fourier_run3}
    >>> sol.t.tolist(), sol.status, sol.solver
    ([0.0, 1.0, 2.0], 0, 'FourierCircle')
    >>> len(sol[1:]), sol[-1].t.tolist()
    (2, [2.0])
    """

    def __init__(self, t, model, representation, data, diagnostics=None, stats=None, status=0, message="",
                 solver="", tracers=None):
        self.t = np.asarray(t, dtype=float)
        if not isinstance(model, Model):
            raise InvalidInput("`model` must be a meanfield.Model.")
        self.model = model
        self.representation = representation
        self.data = np.asarray(data)
        if self.data.shape[0] != self.t.shape[0]:
            raise InvalidInput(f"`data` must have one slice per saved time ({self.t.size}), got {self.data.shape[0]}.")
        self.diagnostics = {k: np.asarray(v) for k, v in (diagnostics or {}).items()}
        self.stats = dict(stats or {})
        self.status = int(status)
        self.message = str(message)
        self.solver = str(solver)
        self._energy = self.diagnostics.pop("energy", None)
        self.tracers = None if tracers is None else np.asarray(tracers, dtype=float)
        if self.tracers is not None and (self.tracers.ndim != 3 or self.tracers.shape[0] != self.t.size):
            raise InvalidInput(f"`tracers` must have shape (T, m, d) with T = {self.t.size} saved times, got "
                             f"{self.tracers.shape}.")

    # -- basic fields ----------------------------------------------------------------------------
    def __len__(self):
        return self.t.size

    def _index(self, i):
        T = self.t.size
        if not isinstance(i, (int, np.integer)) or not -T <= i < T:
            raise InvalidInput(f"`i` must be an integer index into the {T} saved times, got {i!r}.")
        return int(i) % T

    def __getitem__(self, i):
        """The Solution restricted to saved index i (a slice keeps several times)."""
        idx = np.arange(self.t.size)[i] if isinstance(i, slice) else np.array([self._index(i)])
        diags = self.diagnostics_at(idx)
        rep, data, solver = self.representation, self.data[idx], self.solver
        segment_of = getattr(rep, "segment_of", None)          # a run in several representations
        if segment_of is not None and idx.size and np.unique(segment_of(data)).size == 1:
            k = int(segment_of(data)[0])                       # all in one segment: a plain Solution in its own
            rep, data, solver = rep.representations[k], rep.stack(data, k), rep.solvers[k] or solver
        return Solution(self.t[idx], self.model, rep, data, diags, self.stats, self.status, self.message, solver,
                        None if self.tracers is None else self.tracers[idx])

    def diagnostics_at(self, idx):
        """The per-time diagnostics at the saved indices ``idx``, with E_β where it is stored (a
        diagnostic of the run) or already computed; never computed here."""
        diags = {k: v[idx] for k, v in self.diagnostics.items() if v.shape[:1] == self.t.shape}
        if self._energy is not None:
            diags["energy"] = np.asarray(self._energy)[idx]
        return diags

    @property
    @doc_params
    def energy(self):
        """E_β (3.5) at each saved time, shape (T,) (or (T, B) for a batch of particle runs).

        E_β[ρ] = (1/(2β)) ∬ e^{β⟨x,y⟩} ρ(x)ρ(y) dσ dσ, from the state (docs/mathematics.md §4);
        it increases along every run of (USA) and (SA) without noise (Proposition 3.4 and (3.9)).

        Examples
        --------
        {fourier_run3}
        >>> np.round(sol.energy, 6).tolist()
        [0.638685, 0.646767, 0.666049]
        >>> bool(np.all(np.diff(sol.energy) > 0))
        True
        """
        if self._energy is None:
            self._energy = np.array([self.representation.energy(self.model.beta, d) for d in self.data])
        return self._energy

    @property
    @doc_params
    def mass(self):
        """Total mass ∫ρ dσ at each saved time (the sum of the weights for particles), shape (T,).

        Examples
        --------
        {fourier_run3}
        >>> np.round(sol.mass, 12).tolist()
        [1.0, 1.0, 1.0]
        """
        return np.array([self.representation.mass(d) for d in self.data])

    @doc_params
    def density(self, x, i=-1, position=None):
        """ρ at points x at saved index i (PDE solutions only), relative to σ.

        Parameters
        ----------
        x : (..., d) array
            Points on the sphere S^{d-1} (in R^d for `solvers.Gaussian`).
        i : int
            Saved index (negative counts from the end).
        position : float in (0, 1], optional
            For a layered (causal) run, the token position σ (default: the x-marginal over σ).

        Returns
        -------
        (...) array
            The density values (dimensionless; the uniform density is 1).

        Raises
        ------
        AttributeError
            A particle Solution (it has ``positions`` and ``measure`` instead).
        ValueError
            ``x`` off the sphere or of the wrong last dimension, ``i`` out of range, ``position`` for
            a run without positions.

        Examples
        --------
        {fourier_run3}
        >>> np.round(sol.density(np.array([[1.0, 0.0], [-1.0, 0.0]])), 6).tolist()
        [1.567954, 0.585462]
        >>> np.round(sol.density(np.array([[1.0, 0.0]]), i=0), 6).tolist()
        [1.2]
        """
        if not self.representation.is_density:
            raise AttributeError("a particle Solution has no density; use sol.positions or sol.measure(i)")
        if self.representation.domain == "sphere":
            x = check_points(x, "x", dim=self.model.dim)
        else:
            x = np.asarray(x, dtype=float)
            if x.shape[-1:] != (self.model.dim,) or not np.all(np.isfinite(x)):
                raise InvalidInput(f"`x` must be finite points of R^{self.model.dim}, shape (..., {self.model.dim}), "
                                 f"got shape {x.shape}.")
        return self.representation.evaluate(self.data[self._index(i)], x, **self._at(position))

    @doc_params
    def measure(self, i=-1, n=None, position=None, **kwargs):
        """A weighted discrete measure (points, weights) of the state at saved index i.

        For a PDE solution a quadrature discretisation of ρσ (so that `meanfield.observables.wasserstein` compares
        it with particles); for particles ``(positions[i], weights)``.

        Parameters
        ----------
        i : int
            Saved index.
        n : int, optional
            Number of points of the discretisation (PDE solutions; default: the representation's).
        position : float in (0, 1], optional
            For a layered (causal) run, the measure of the token ``position`` σ; without it the
            joint measure on (0, 1] × S^{d−1} (`meanfield.representations.layered.JointMeasure`).
        **kwargs
            Options of the representation's ``measure``.

        Returns
        -------
        points : (n, d) array
            Points on the sphere.
        weights : (n,) array
            Non-negative weights summing to the mass.

        Raises
        ------
        ValueError
            ``i`` out of range, ``position`` for a run without positions.

        Examples
        --------
        {fourier_run3}
        >>> x, w = sol.measure(n=64)
        >>> x.shape, round(float(w.sum()), 12)
        ((64, 2), 1.0)
        >>> round(mf.wasserstein(sol.measure(0, n=64), sol.measure(-1, n=64)), 3) > 0
        True
        """
        return self.representation.measure(self.data[self._index(i)], n=n, **self._at(position), **kwargs)

    def _at(self, position):
        """The keyword of a token position for a layered representation (one with ``positions``)."""
        if position is None:
            return {}
        if getattr(self.representation, "positions", None) is None or not self.representation.is_density:
            raise InvalidInput(f"`position` applies to a run of a masked model with positions (a layered density); "
                             f"this Solution is {self.representation.name!r}.")
        return {"position": position}

    def mean(self, i=-1):
        """The mean m of the Gaussian continuum at saved index i (`solvers.Gaussian`).

        Parameters
        ----------
        i : int
            Saved index.

        Returns
        -------
        (d,) array
            The mean of N(m, Σ) in R^d.

        Raises
        ------
        AttributeError
            A Solution of another solver.

        Examples
        --------
        With Q = K = V = I, Σ(t) = Σ0/(1 − 2βt) and ṁ = (1 + βσ²(t)) m (docs/gaussian.md):

        >>> import numpy as np
        >>> import meanfield as mf, solvers
        >>> sol = solvers.Gaussian(mf.Model(beta=0.5, dim=2)).solve((np.array([1.0, 0.0]), np.eye(2)),
        ...                                                         [0.0, 0.5], progress=False)
        >>> np.round(sol.mean(), 6).tolist(), round(float(np.exp(0.5) * np.sqrt(2)), 6)
        ([2.331644, 0.0], 2.331644)
        """
        return self._moment("mean", i)

    def covariance(self, i=-1):
        """The covariance Σ of the Gaussian continuum at saved index i (`solvers.Gaussian`; another
        solver's Solution raises AttributeError, as `mean` does).

        Parameters
        ----------
        i : int
            Saved index (−1, the default, is the last; negative indices count from the end
            as in a list).

        Returns
        -------
        (d, d) array
            The covariance of N(m, Σ): symmetric positive definite while the run lasts (under
            Q = K = V = I it blows up at t = 1/(2β)).

        Examples
        --------
        From N(0, I) with Q = K = V = I, Σ(t) = Σ0/(1 − 2βt) (docs/gaussian.md), so 2·I at βt = 1/4:

        >>> import numpy as np, meanfield as mf, solvers
        >>> model = mf.Model(beta=0.5, dim=2)
        >>> sol = solvers.Gaussian(model).solve((np.zeros(2), np.eye(2)), [0.0, 0.5], progress=False)
        >>> np.round(sol.covariance(), 6).tolist()
        [[2.0, 0.0], [0.0, 2.0]]
        """
        return self._moment("covariance", i)

    def _moment(self, which, i):
        get = getattr(self.representation, which, None)
        if get is None:
            raise AttributeError(f"a {self.representation.name!r} Solution has no {which}; the Gaussian continuum "
                                 "(solvers.Gaussian) has one")
        return get(self.data[self._index(i)])

    @doc_params
    def state(self, i=-1):
        """The state at saved index i as a `meanfield.representations.State`.

        It carries its representation and offers ``density(x)``, ``measure(n)``, ``spectrum()``,
        ``to_grid(n)``.

        Parameters
        ----------
        i : int
            Saved index (negative counts from the end).

        Returns
        -------
        State
            The state, its representation, its time and the model.

        Raises
        ------
        ValueError
            ``i`` out of range.

        Examples
        --------
        {fourier_run3}
        >>> state = sol.state(-1)
        >>> state, round(float(state.density([1.0, 0.0])), 6)
        (State('fourier', t=2.0), 1.567954)
        """

        j = self._index(i)
        return State(self.representation, self.data[j], t=float(self.t[j]), model=self.model)

    @property
    def segments(self):
        """The run's segments as plain Solutions, in time order: ``[self]`` for a run in one
        representation; for a spectral run handed over to `solvers.Lagrangian`, the spectral part
        and the Lagrangian part (`meanfield.representations.segments`)."""
        split = getattr(self.representation, "split", None)
        return [self] if split is None else split(self)

    def concat(self, *others):
        """One Solution with the saved times of this run followed by those of its continuations
        (each starts at the last saved time of the one before, which is kept once)."""
        for prev, nxt in zip((self,) + others[:-1], others):
            if not nxt.t.size or abs(nxt.t[0] - prev.t[-1]) > 1e-12 * max(1.0, abs(prev.t[-1])):
                raise InvalidInput(f"`others` must continue this run: a continuation starts at t={prev.t[-1]!r}, "
                                 f"got one starting at t={nxt.t[0] if nxt.t.size else None!r}.")
        return concat(self, *others)

    @property
    def positions(self):
        """Particle positions, shape (T, n, d) or (T, B, n, d) (particle solutions only).

        Raises
        ------
        AttributeError
            A PDE Solution, or a run that kept the positions at some saved times only (naming those,
            see `meanfield.representations.sampled_particles`).

        Examples
        --------
        >>> import meanfield as mf, solvers
        >>> x0, _ = mf.sample(mf.densities.uniform(), 16, 3, rng=0)
        >>> sol = solvers.Particles(mf.Model(beta=1.0, dim=3)).solve(x0, [0.0, 1.0], progress=False)
        >>> sol.positions.shape
        (2, 16, 3)
        """
        if self.representation.is_density:
            raise AttributeError("a PDE Solution has no positions; use sol.density(x, i) or sol.measure(i)")
        stacked = getattr(self.representation, "stacked_positions", None)
        return self.data if stacked is None else stacked(self.data)

    @property
    def radii(self):
        """Token norms r_j at each saved time, shape (T, n) or (T, B, n): the diagnostic "radii" of a particle
        run with a normalisation scheme (docs/normalization.md), else all 1; for labels that carry their
        radius (`solvers.Lagrangian`) the radius of each label, (T, n)."""
        if self.representation.is_density:
            per_label = getattr(self.representation, "radii", None)
            if per_label is None:
                raise AttributeError("this PDE Solution has no token radii; solvers.Particles and solvers.Lagrangian "
                                     "report them")
            return np.stack([per_label(d) for d in self.data])
        radii = self.diagnostics.get("radii")
        if radii is not None:
            return radii
        return np.ones(self.t.shape + tuple(np.shape(self.data[0])[:-1]))

    @property
    def weights(self):
        """Particle weights, shape (n,) (particle solutions only).

        Raises
        ------
        AttributeError
            A PDE Solution (use ``measure(i)``).

        Examples
        --------
        >>> import meanfield as mf, solvers
        >>> x0, _ = mf.sample(mf.densities.uniform(), 16, 3, rng=0)
        >>> sol = solvers.Particles(mf.Model(beta=1.0, dim=3)).solve(x0, [0.0, 1.0], progress=False)
        >>> sol.weights.shape, float(sol.weights.sum())
        ((16,), 1.0)
        """
        if self.representation.is_density:
            raise AttributeError("a PDE Solution has no particle weights; use sol.measure(i)")
        return self.representation.weights

    def __repr__(self):
        rng = f"t in [{self.t[0]:g}, {self.t[-1]:g}]" if self.t.size else "no saved times"
        return (f"Solution({self.solver or self.representation.name}, {self.model!r}, {self.t.size} saved times, "
                f"{rng}, status={self.status}{', ' + self.message if self.message else ''})")

    @doc_params
    def flow(self, points, i=None, **options):
        """Φ_t(points), the flow map of the run applied to ``points`` (m, d) on the sphere: (T, m, d) at
        every saved time, or (m, d) at saved index ``i``.

        The run is re-done from its first saved state with ``points`` as passive tracers
        (``solve(..., tracers=points)``, `solvers.tracers.flow_map`) on the solver that made it (at
        its resolution, with its stepper and that stepper's default tolerances, or ``options``), up
        to the saved time asked for: it costs about one run, and the tracers are as accurate as
        the run (its error control includes them). A run handed over to the characteristics is
        re-done with the hand-over. Particles, Lagrangian, FourierCircle, SphericalHarmonics and
        Gegenbauer runs of the paper's noiseless layer (docs/tracers.md); the re-run is the `solvers`
        package's (registered when it is imported: `register_flow_map`).

        Parameters
        ----------
        points : (m, d) array
            Starting points on the sphere, at the run's first saved time.
        i : int, optional
            Saved index; default: every saved time.
        **options
            Options of the re-run's ``solve`` (``rtol``, ``atol``, ...).

        Returns
        -------
        (T, m, d) or (m, d) array
            The tracers at every saved time (the first is ``points``), or at index ``i``.

        Raises
        ------
        RuntimeError
            The `solvers` package was not imported.
        ValueError
            A run whose solver does not carry tracers, a noisy or masked run, points off the sphere.

        Examples
        --------
        {fourier_run3}
        >>> track = sol.flow(np.array([[1.0, 0.0], [0.0, 1.0]]))
        >>> track.shape, np.round(track[-1], 6).tolist()          # the mass at θ = 0 attracts
        ((3, 2, 2), [[1.0, 0.0], [0.277351, 0.960769]])
        """
        if not FLOW_MAPS:
            raise RuntimeError("`flow` re-runs the Solution on its solver: import the solvers package first "
                               "(`import solvers`).")
        last = self.t.size - 1 if i is None else self._index(i)
        track = FLOW_MAPS[-1](self, points, last, **options)
        return track if i is None else track[-1]

    def cluster_trajectories(self, **kwargs):
        """The clusters followed through the saved times: `meanfield.observables.diagnostics.follow_clusters`."""
        return follow_clusters(self, **kwargs)

    @doc_params
    def animate(self, path, **kwargs):
        """Write a movie of the run to ``path`` (.gif or .mp4) and return a summary dict: particles or
        densities on S^1 / S^2, frame by frame (`meanfield.results.movies.animate`, whose keywords it takes:
        ``compare``, ``frames``, ``max_frames``, ``fps``, ``trail``, ``size``, ``dpi``, ``progress``).

        Parameters
        ----------
        path : str or os.PathLike
            Ending in .gif (Pillow) or .mp4 (ffmpeg).
        **kwargs
            The keywords of `meanfield.results.movies.animate`.

        Returns
        -------
        dict
            ``path``, ``frames`` (their count), ``times`` (the saved times drawn) and ``writer``.

        Raises
        ------
        ValueError
            Another suffix, a bad ``fps`` or ``frames``.

        Examples
        --------
        >>> import os, tempfile
        {fourier_run}
        >>> movie = sol.animate(os.path.join(tempfile.mkdtemp(), "run.gif"), size=1.5, dpi=40, progress=False)
        >>> movie["frames"], list(map(float, movie["times"])), movie["writer"]
        (2, [0.0, 1.0], 'pillow')
        """

        return animate(self, path, **kwargs)

    @doc_params
    def plot(self, times=None, path=None, show_energy=True, scale="auto", t_end=None):
        """The natural picture of the run with E_β(t); ``scale`` "auto", "linear", "log" or
        "perturbation" (ρ − 1). See `meanfield.results.plotting.plot_solution`.

        A space-time density map on S^1, Mollweide maps at chosen times on S^2, particle positions
        for particles, beside the energy against time.

        Parameters
        ----------
        times : list of int or float, optional
            The saved times of the S^2 maps (None: first, middle, last; ints: indices; floats: the
            nearest saved times).
        path : str or os.PathLike, optional
            Write the figure there (PNG/PDF/SVG).
        show_energy : bool
            Draw E_β(t) beside the state.
        scale : "auto", "linear", "log" or "perturbation"
            The colour scale of the density.
        t_end : float, optional
            The requested end of the run (default: the one the solver recorded); the times a run
            that stopped early did not reach are hatched.

        Returns
        -------
        matplotlib.figure.Figure

        Raises
        ------
        ValueError
            An unknown ``scale``.

        Examples
        --------
        {fourier_run}
        >>> fig = sol.plot(scale="perturbation")
        >>> len(fig.axes) >= 2
        True
        """

        return plot_solution(self, times=times, path=path, show_energy=show_energy, scale=scale, t_end=t_end)


def concat(*parts):
    """Join the Solutions of consecutive segments of one run (a refined or continued run). Each
    segment after the first starts from a state already saved (or from a refinement point), so its
    first saved time is dropped. Consecutive segments in one representation are carried into the
    last one's layout (a refined run); segments in different representations (a spectral run handed
    over to the characteristics) are kept side by side in a `representations.segments.Segments`."""
    if len(parts) == 1:
        return parts[0]
    last = parts[-1]
    # (segment, its first slice is new) in time order; runs of one representation form a group
    pieces = [(s, j == 0 or k > 0) for j, p in enumerate(parts) for k, s in enumerate(p.segments)]
    pieces = [(s, new) for s, new in pieces if s.t.size > (0 if new else 1)]
    groups = []
    for s, new in pieces:
        if groups and type(s.representation) is type(groups[-1][-1][0].representation):
            groups[-1].append((s, new))
        else:
            groups.append([(s, new)])
    ts, datas, diags, tracks = [], [], {}, []
    keys = set().union(*[set(p.diagnostics) for p in parts]) | {"energy"}
    for group in groups:
        rep = group[-1][0].representation
        chunk = []
        for p, new in group:
            sl = slice(0 if new else 1, None)
            ts.append(p.t[sl])
            tracks.append(None if p.tracers is None else p.tracers[sl])
            chunk.append(rep.embed(p.data[sl], p.representation))
            stored = p.diagnostics_at(slice(None))
            for key in keys:
                vals = stored.get(key)
                vals = np.full(p.t.shape, np.nan) if vals is None else np.asarray(vals)
                diags.setdefault(key, []).append(vals[sl])
        datas.append(np.concatenate(chunk))
    solver = last.solver
    if len(groups) == 1:
        rep, data = groups[0][-1][0].representation, datas[0]
    else:
        names = [g[-1][0].solver for g in groups]
        rep, data = Segments.join([g[-1][0].representation for g in groups], datas, names)
        solver = "+".join(names)
    stats = {}
    for p in parts:
        for key, val in p.stats.items():
            if key in ("nfev", "nsteps", "nrejected", "wall_time"):
                stats[key] = stats.get(key, 0) + val
            else:
                stats[key] = val
    stats["segments"] = len(parts)
    diag_arrays = {k: np.concatenate(v) for k, v in diags.items() if any(np.size(a) for a in v)}
    if diag_arrays.get("energy") is not None and np.isnan(diag_arrays["energy"]).any():
        diag_arrays.pop("energy")
    tracers = np.concatenate(tracks) if all(a is not None for a in tracks) else None      # all or none
    return Solution(np.concatenate(ts), last.model, rep, data, diag_arrays, stats,
                    status=last.status, message=last.message, solver=solver, tracers=tracers)


def load(path):
    """Read a `Solution` written by `Solution.save` (NetCDF).

    Parameters
    ----------
    path : str or os.PathLike
        The NetCDF file.

    Returns
    -------
    Solution
        The saved run: times, model, representation, states, diagnostics and counters, as saved.

    Raises
    ------
    ValueError
        Naming the file when it is missing, empty, truncated, not NetCDF, or not a meanfield Solution
        (no representation, model or time, or a variable the representation needs).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> sol = solvers.Particles(mf.Model(beta=1.0, dim=3)).solve(
    ...     mf.sample(mf.densities.uniform(), 16, 3, rng=0)[0], [0.0, 1.0], progress=False)
    >>> back = mf.load(sol.save(os.path.join(tempfile.mkdtemp(), "run.nc")))
    >>> bool(np.array_equal(back.positions, sol.positions)), back.t.tolist(), back.model.beta
    (True, [0.0, 1.0], 1.0)
    """
    import xarray as xr  # deferred: xarray is heavy

    try:
        ds = xr.open_dataset(path, engine="netcdf4", decode_times=False)     # t is a number (gridded.TIME_ATTRS)
    except (OSError, ValueError, RuntimeError) as exc:
        raise InvalidInput(f"`path` {str(path)!r} is not a readable NetCDF file ({type(exc).__name__}: {exc}).") from None
    with ds:
        missing = [k for k in ("representation", "model_json") if k not in ds.attrs]
        if "time" not in ds.coords or "energy" not in ds.data_vars:
            missing.append("the time coordinate and the energy variable")
        if missing:
            raise InvalidInput(f"`path` {str(path)!r} is not a meanfield Solution: it lacks {', '.join(missing)}.")
        try:
            ds.load()
            return Solution.from_xarray(ds)
        except (KeyError, ValueError, RuntimeError, OSError) as exc:
            raise InvalidInput(f"`path` {str(path)!r} is a damaged meanfield Solution: {type(exc).__name__}: {exc}") from None
