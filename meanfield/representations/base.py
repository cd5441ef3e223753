"""Representation base class and the registry used by `meanfield.load`."""
import importlib
import os
import pkgutil

import numpy as np

from .._docs import doc_params
from ..errors import InvalidInput, NoCellMeans
from ..spaces.gridded import cell_grid_of
from ..validation import check_int

_REGISTRY = {}      # name -> class: each representation registers itself where it is defined


def register(name, target):
    """Register a representation class (``"module:Class"`` or the class itself) under ``name``; a subclass
    of `Representation` that sets ``name`` is registered when it is defined, without this call."""
    _REGISTRY[name] = target


def _import_representations():
    """Import every module of this package: each registers the representations it defines."""
    for info in pkgutil.iter_modules([os.path.dirname(__file__)]):
        importlib.import_module(f"{__package__}.{info.name}")


def lookup_representation(name):
    if name not in _REGISTRY:
        _import_representations()
    target = _REGISTRY.get(name)
    if target is None:
        raise InvalidInput(f"unknown representation {name!r}; known: {sorted(_REGISTRY)}")
    if isinstance(target, str):
        mod, cls = target.split(":")
        target = getattr(importlib.import_module(mod), cls)
    return target


def from_dataset(ds):
    """Rebuild (representation, data) from a Dataset written by `Representation.to_dataset`."""
    cls = lookup_representation(ds.attrs["representation"])
    return cls.from_dataset(ds)


@doc_params
class Representation:
    """Contract for a state representation (one time slice is ``data``; a run stacks them on axis 0).

    Subclasses set ``name`` (the registry key) and ``dim`` and implement:

    1. ``evaluate(data, x)``: density values at points x of shape (..., d).
    2. ``mass(data)``: ∫ρ dσ (or the total weight).
    3. ``energy(beta, data)``: E_β (3.5), with the β = 0 convention of docs/mathematics.md §4.
    4. ``measure(data, n=None)``: a weighted discrete measure (points, weights) approximating ρσ.
    5. ``to_dataset(data_all)`` -> dict of data variables {name: (dims, array)} (the time axis is
       called "time"), coords and attrs; ``from_dataset(ds)`` (classmethod) inverts it exactly.
    6. optional: ``space_time(data_all, n)`` -> (θ midpoints, ρ (T, n)) on S^1 (a zonal series: (s, the
       law of s (T, m)), what `meanfield.results.plotting` draws for it); ``to_grid(data, n)``: the density on a
       grid as a CF-described DataArray.
    7. optional, for files and pictures: ``cell_means(data, grid)``: the mean density over each cell of a
       `meanfield.spaces.gridded.CellGrid` (``cells(n)``, default ``default_cells`` cells), i.e. μ(cell)/σ(cell):
       the grid's mass Σ ρ̄·σ(cell) is the state's mass for any state, clustered or not.

    Densities are relative to σ, the uniform probability measure on S^{d-1} (docs/mathematics.md §2),
    so the uniform density is 1. A subclass that sets ``name`` is registered under it when it is
    defined: `meanfield.load` reads files with that registry (``register(name, cls)`` adds another name).

    Examples
    --------
    {fourier_run}
    >>> rep = sol.representation
    >>> isinstance(rep, mf.representations.Representation), rep.name, rep.dim, rep.is_density
    (True, 'fourier', 2, True)
    >>> round(rep.mass(sol.data[-1]), 12), round(rep.energy(1.0, sol.data[-1]), 6) == round(float(sol.energy[-1]), 6)
    (1.0, True)
    """

    name = None
    dim = None
    # what the state is (code outside a representation asks these, never ``name``):
    is_density = True        # a density relative to σ (else a measure of points)
    keeps_identity = False   # each point of the state is one material point at all times (labels, particles)
    on_mesh = False          # nodal values on a mesh: its vertices are exact evaluation points
    zonal = False            # a function of s = ⟨x, axis⟩ only (its picture: the law of s)
    point_cloud = False      # the data are the points themselves (``Solution.positions``)
    layered = False          # one state per token position (``positions``: the nodes s_i; causal runs)

    def __init_subclass__(cls, **kwargs):
        """A subclass that sets its own ``name`` is registered under it (the first class of a name keeps it)."""
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if isinstance(name, str):
            _REGISTRY.setdefault(name, cls)

    def resolution_label(self, data=None):
        """The resolution in words (``K = 256 modes``, ``n = 500 particles``; default: the name)."""
        return str(self.name)
    domain = "sphere"       # where the state lives: "sphere" (S^{d-1}) or "euclidean" (R^d)

    def evaluate(self, data, x):
        raise NotImplementedError

    def mass(self, data):
        raise NotImplementedError

    def energy(self, beta, data):
        raise NotImplementedError

    def measure(self, data, n=None):
        raise NotImplementedError

    def to_dataset(self, data_all):
        raise NotImplementedError

    @classmethod
    def from_dataset(cls, ds):
        raise NotImplementedError

    def embed(self, data_all, source):
        """Data of ``source`` (another representation of the same kind, e.g. a coarser resolution)
        in this representation's layout; the default accepts only identical layouts."""
        data_all = np.asarray(data_all)
        if source.name != self.name or data_all.shape[1:] != self._slice_shape(data_all):
            raise InvalidInput(f"cannot carry {source.name!r} data of shape {data_all.shape[1:]} into {self.name!r}.")
        return data_all

    def _slice_shape(self, data_all):
        return data_all.shape[1:]

    def power(self, data):
        raise AttributeError(f"representation {self.name!r} has no spectrum")

    def to_grid(self, data, n=None):
        """The density on a grid as an `xarray.DataArray` (θ on S^1, lat/lon in degrees on S^2)."""
        raise AttributeError(f"representation {self.name!r} has no grid of density values")

    default_cells = {2: 512, 3: 64}     # cells on S^1; latitude bands on S^2 (× twice as many longitudes)

    def cells(self, n=None):
        """The `meanfield.spaces.gridded.CellGrid` of the cell means: n cells on S^1, n latitude bands × 2n
        longitudes on S^2 (default ``default_cells``)."""
        n = self.default_cells[self.dim] if n is None else n
        return cell_grid_of(self.dim, check_int(n, "grid_size", low=1))

    def cell_means(self, data, grid):
        """The mean density μ(cell)/σ(cell) over each cell of ``grid`` (a `meanfield.spaces.gridded.CellGrid`)."""
        raise NoCellMeans(f"representation {self.name!r} has no cell means")


@doc_params
class State:
    """The state of a run at one saved time, carrying its representation (like pyshtools' SHCoeffs).

    ``data`` is read only through ``representation``; ``density(x)``, ``measure(n)``,
    ``spectrum()`` (degree powers ‖ρ_l‖² in L²(σ), where the representation is spectral),
    ``to_grid(n)`` (an `xarray.DataArray`), ``to_pyshtools()`` (on S^2, spherical harmonics),
    ``mass`` and ``energy`` (E_β, (3.5)).

    Parameters
    ----------
    representation : Representation
        How ``data`` is to be read.
    data : array
        One time slice in the representation's layout (as ``Solution.data[i]``).
    t : float, optional
        The time of the state.
    model : Model, optional
        The model (its β gives ``energy``).

    Examples
    --------
    {fourier_run}
    >>> state = sol.state(-1)
    >>> state.t, round(float(state.mass), 12), round(float(state.energy), 6) == round(float(sol.energy[-1]), 6)
    (1.0, 1.0, True)
    >>> np.round(sol.state(0).spectrum()[:3], 12).tolist()    # ‖ρ_k‖² in L²(σ): 1 + 0.2 cos θ has 0.2²/2
    [1.0, 0.02, 0.0]
    """

    def __init__(self, representation, data, t=None, model=None):
        self.representation = representation
        self.data = data
        self.t = t
        self.model = model

    @doc_params
    def density(self, x):
        """ρ at the points ``x`` (relative to σ).

        Parameters
        ----------
        x : (..., d) array
            Points on the sphere S^{d-1}.

        Returns
        -------
        (...) array
            The density values.

        Examples
        --------
        {fourier_run}
        >>> np.round(sol.state(0).density([[1.0, 0.0], [0.0, 1.0]]), 6).tolist()
        [1.2, 1.0]
        """
        return self.representation.evaluate(self.data, np.asarray(x, dtype=float))

    @doc_params
    def measure(self, n=None, **kwargs):
        """A weighted discrete measure (points, weights) of the state (a quadrature of ρσ).

        Parameters
        ----------
        n : int, optional
            Number of points (default: the representation's; a rule may round it).
        **kwargs
            Options of the representation's ``measure`` (``position`` of a layered state).

        Returns
        -------
        points : (n, d) array
            Points on the sphere.
        weights : (n,) array
            Non-negative, summing to the mass.

        Examples
        --------
        {fourier_run}
        >>> x, w = sol.state().measure(32)
        >>> x.shape, round(float(w.sum()), 12)
        ((32, 2), 1.0)
        """
        return self.representation.measure(self.data, n=n, **kwargs)

    def spectrum(self):
        return self.representation.power(self.data)

    def to_pyshtools(self):
        """A ``pyshtools.SHCoeffs`` of the state, for the representations that have one (spherical
        harmonics on S^2: `harmonics.SphericalHarmonicSeries.to_pyshtools`).

        Returns
        -------
        pyshtools.SHCoeffs
            Real coefficients, lmax the run's, normalization '4pi' (orthonormal in L²(σ)),
            csphase=1 (no Condon–Shortley phase): the numbers of the state unchanged.

        Raises
        ------
        AttributeError
            A state of another representation.

        Examples
        --------
        >>> import meanfield as mf, solvers
        >>> rho0 = mf.densities.spherical_harmonics([[1, 0, 0.3]])
        >>> sol = solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3), lmax=16).solve(rho0, [0.0, 0.5],
        ...                                                                            progress=False)
        >>> coeffs = sol.state().to_pyshtools()
        >>> coeffs.lmax, coeffs.normalization, coeffs.csphase, round(float(coeffs.coeffs[0, 0, 0]), 12)
        (16, '4pi', 1, 1.0)
        """
        convert = getattr(self.representation, "to_pyshtools", None)
        if convert is None:
            raise AttributeError(f"representation {self.representation.name!r} has no pyshtools coefficients "
                                 "(only a spherical-harmonic state on S^2 has)")
        return convert(self.data)

    @doc_params
    def to_grid(self, n=None, kind="points"):
        """The density on a grid as an `xarray.DataArray`: ``kind="points"`` its values at the grid
        points (``to_grid`` of the representation), ``kind="means"`` its mean over each cell
        (``cell_means``: mass conserved, clusters narrower than a cell kept; the cells' bounds are
        ``representation.cells(n).bounds``).

        Parameters
        ----------
        n : int, optional
            Grid size: points (or cells) on S^1, latitudes (or latitude bands, with 2n longitudes) on
            S^2 (default: the representation's).
        kind : "points" or "means"
            Point values or cell means.

        Returns
        -------
        xarray.DataArray
            Dimension ``theta`` (radians) on S^1, ``lat``/``lon`` (degrees) on S^2, ``s`` = ⟨x, e⟩ for a
            zonal state; a scalar ``time`` coordinate when the state has a time.

        Raises
        ------
        ValueError
            An unknown ``kind``.
        AttributeError
            A representation without a grid (particles: only ``kind="means"``).

        Examples
        --------
        {fourier_run}
        >>> da = sol.state().to_grid(32, kind="means")
        >>> da.dims, float(da.time), round(float(da.mean()), 12)          # equal cells: the mean is the mass
        (('theta',), 1.0, 1.0)
        """
        if kind == "means":
            grid = self.representation.cells(n)
            da = grid.dataarray(self.representation.cell_means(self.data, grid))
        elif kind == "points":
            da = self.representation.to_grid(self.data, n)
        else:
            raise InvalidInput(f"`kind` must be 'points' or 'means', got {kind!r}.")
        if self.t is not None:
            da = da.assign_coords(time=self.t)
        return da

    @property
    def mass(self):
        return self.representation.mass(self.data)

    @property
    def energy(self):
        if self.model is None:
            raise AttributeError("this State has no model, so no β for its energy")
        return self.representation.energy(self.model.beta, self.data)

    def __repr__(self):
        return f"State({self.representation.name!r}, t={self.t})"
