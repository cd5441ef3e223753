"""Densities read from files: a table of values (`read_density_file`), a NetCDF grid of point values or
cell means (`grid_from_file`, `density_from_grid`), spherical-harmonic coefficients as pyshtools writes
them (`from_pyshtools`), a saved Solution's state (`saved_state`), and `from_file`, which tells them
apart. Each gives a density of `meanfield.measures.tabulated` (``mf.densities`` offers them all).
"""
import pathlib

import numpy as np

from ..spaces.quadrature import gauss_legendre_grid, trapezoid
from ..spaces.gridded import circle_cells, sphere_cells, time_values
from ..transformer.model import Model
from ..representations import State, from_dataset
from ..representations.harmonics import PYSHTOOLS_CSPHASE, PYSHTOOLS_NORMALIZATION, pyshtools_ducc
from ..errors import InvalidInput

from .tabulated import CellMeans, GridValues, HarmonicSeries, LayeredStateDensity, StateDensity, on_grid


def read_density_file(path):
    """(is_solution, grid, bounds) of a NetCDF file: whether it is a saved `Solution`, else its ``density``
    variable (None without one) and whether a grid dimension has cell bounds. ValueError naming
    ``path`` when the file is missing or not readable NetCDF."""

    import xarray as xr  # deferred: xarray is heavy

    where = f"`path` {str(path)!r}"
    if not pathlib.Path(path).is_file():
        raise InvalidInput(f"{where}: no such file.")
    try:
        with xr.open_dataset(path, engine="netcdf4", decode_times=False) as ds:
            # a copy that kept the global attributes but only the grid (ds[["density"]]) is a grid file
            is_solution = "representation" in ds.attrs and "model_json" in ds.attrs and "energy" in ds.variables
            grid = None if is_solution or "density" not in ds.variables else ds["density"].load()
            bounds = grid is not None and any(f"{d}_bnds" in ds.variables or "bounds" in
                                              getattr(ds.variables.get(d), "attrs", {}) for d in grid.dims)
    except (OSError, ValueError, RuntimeError) as exc:
        raise InvalidInput(f"{where} is not a readable NetCDF file ({type(exc).__name__}: {exc}).") from None
    return is_solution, grid, bounds


def grid_from_file(path):
    """The density on the grid of a NetCDF file holding the CF variable ``density(time, theta)`` or
    ``density(time, lat, lon)`` (its last time), e.g. a file written by ``Solution.save(grid=...)`` after
    another tool kept only the grid; `meanfield.from_file` reads saved Solutions too. What the values
    are is read from the variable's ``cell_methods`` ("... theta: mean", "area: mean": cell means;
    "point": point values), or, without it, from the cells' bounds variables (``theta_bnds``,
    ``lat_bnds``, ...): cell means when present, point values otherwise.

    - Point values (``save(grid="points")``), on the grids of `on_grid` (midpoints θ_j = 2π(j + ½)/n
      on S^1, the Gauss–Legendre grid on S^2): `on_grid` of them.
    - S^1 cell means on n equal cells (`meanfield.spaces.gridded.circle_cells`): the mean of e^{ikθ} over a
      cell of width h = 2π/n about θ_j is e^{ikθ_j}·sinc(kh/2), so the discrete Fourier coefficients
      of the means, divided by sin(πk/n)/(πk/n), are those of the density's values at the midpoints,
      |k| <= n/2 (docs/mathematics.md §2 for the c_k): the result is `on_grid` of these midpoint values, exact
      (to round-off) when the density is band-limited to |k| <= n/2 (then `solvers.FourierCircle`
      starts from its exact coefficients c_k, k < n/2); otherwise it is that band-limited
      reconstruction, with the file's mass. A reconstruction that is negative somewhere (the cells do
      not resolve the density, e.g. clusters) is refused.
    - S^2 cell means on `meanfield.spaces.gridded.sphere_cells` (n latitude bands × 2n longitudes, area
      weighted): there is no exact inverse from finitely many cell means; the result is `CellMeans`,
      a continuous non-negative density whose cell means (so whose mass) are the file's to
      round-off, with point error O(h²) (O(h) in the polar bands), h = π/n. Its derivative jumps at
      the cell edges, so a solver's quadrature of it (`solvers.SphericalHarmonics`' projection)
      sees a mass 1 ± 1e-5: pass ``normalize=True`` there.

    Zonal grids in s (``save(grid=True)`` of a Gegenbauer run) and other grids are refused: give
    the saved Solution instead.

    Raises ValueError naming ``path`` when the file is missing, not NetCDF, a saved Solution, a grid that
    is not one of these, or ``cell_methods`` that are neither "point" nor "mean".
    """
    is_solution, grid, bounds = read_density_file(path)
    if is_solution:
        raise InvalidInput(f"`path` {str(path)!r} is a saved Solution: read it with `meanfield.from_file` (its last state).")
    return density_from_grid(path, grid, bounds)


def density_from_grid(path, grid, bounds):
    """`grid_from_file` after the read: the density of the ``density`` variable ``grid`` (None: the file
    has none) of the file ``path`` (named in the messages), ``bounds`` whether its dimensions have cell
    bounds (`read_density_file`)."""

    where = f"`path` {str(path)!r}"
    if grid is None:
        raise InvalidInput(f"{where} is neither a meanfield Solution nor a grid file with a `density` variable.")
    values = np.asarray(grid.values if "time" not in grid.dims else grid.isel(time=-1).values, dtype=float)
    dims = tuple(d for d in grid.dims if d != "time")
    if dims == ("s",):
        raise InvalidInput(f"{where}: its `density` is a zonal grid in s = <x, e> (a Gegenbauer run); grid_from_file reads "
                         "grids on S^1 (time, theta) and S^2 (time, lat, lon): give the saved Solution instead.")
    if dims not in (("theta",), ("lat", "lon")):
        raise InvalidInput(f"{where}: its `density` has dimensions {grid.dims}; expected (time, theta) or (time, lat, lon).")
    means = _holds_cell_means(grid.attrs.get("cell_methods"), dims, bounds, where)
    if means:
        cells = circle_cells(values.size) if dims == ("theta",) else sphere_cells(values.shape[0])
        expected = cells.centres if values.shape == cells.shape else None
        what = "the cells of meanfield.spaces.gridded." + ("circle_cells(n)" if dims == ("theta",) else
                                                    "sphere_cells(n): n equal-angle latitude bands x 2n longitudes")
    elif dims == ("theta",):
        expected = {"theta": trapezoid(values.size).angles}
        what = "the grid of densities.on_grid (midpoints theta_j = 2 pi (j + 1/2)/n)"
    else:
        theta, phi = gauss_legendre_grid(*values.shape)[:2]
        expected = {"lat": 90 - np.degrees(theta), "lon": np.degrees(phi)}
        what = "the grid of densities.on_grid (Gauss-Legendre lat, lon = 360 k/nphi)"
    for c in dims:
        if (expected is None or c not in grid.coords
                or not np.allclose(grid[c].values, expected[c], rtol=0, atol=1e-9)):
            raise InvalidInput(f"{where}: its `{c}` coordinate is not {what}.")
    if not means:
        return GridValues(values)
    if np.any(~np.isfinite(values)) or values.min() < 0:
        raise InvalidInput(f"{where}: its cell means must be finite and non-negative; they lie in "
                         f"[{np.nanmin(values):.3g}, {np.nanmax(values):.3g}].")
    if dims == ("lat", "lon"):
        return CellMeans(values)
    n = values.size
    points = np.fft.irfft(np.fft.rfft(values) / np.sinc(np.arange(n // 2 + 1) / n), n)   # midpoint values
    if points.min() < 0:
        raise InvalidInput(f"{where}: the band-limited density with these {n} cell means is negative (minimum "
                         f"{points.min():.3g} at theta = {trapezoid(n).angles[np.argmin(points)]:.4g}): the cells do not "
                         "resolve the density; save it with a larger grid_size, or start from the saved Solution.")
    return GridValues(points)


def _holds_cell_means(cell_methods, dims, has_bounds, where):
    """Whether a grid's values are cell means (True) or point values (False), from its CF
    ``cell_methods`` ("name: [name: ...] method" pairs; "area" stands for lat and lon) on ``dims``, or,
    when it says nothing of them, from the presence of the cells' bounds."""
    methods, names = {}, []
    for token in str(cell_methods or "").split():
        if token.endswith(":"):
            names.append(token[:-1])
        elif names:
            methods.update({name: token for name in names})
            names = []
    spatial = {methods[k] for k in (*dims, "area") if k in methods}
    if not spatial:
        return has_bounds
    if spatial == {"mean"}:
        return True
    if spatial == {"point"}:
        return False
    raise InvalidInput(f"{where}: its `density` has cell_methods {cell_methods!r}; expected 'point' or 'mean' on "
                     f"{' and '.join(dims)} (or 'area: mean').")


def from_pyshtools(coeffs, kind="coefficients", nthreads=1):
    """Initial data on S^2 from a ``pyshtools.SHCoeffs``.

    ``coeffs`` carries its normalisation. Real '4pi' coefficients with ``csphase=1`` are ours
    exactly (see the module docstring) and are copied unchanged; any other normalisation
    ('ortho', 'schmidt', 'unnorm'), either Condon–Shortley phase and the complex kind are first
    converted by pyshtools (``coeffs.convert(normalization="4pi", csphase=1, kind="real")``).

    ``kind="coefficients"`` (default) returns the array ``clm`` of shape (2, lmax+1, lmax+1) that
    `solvers.SphericalHarmonics` takes as ``initial`` (lmax <= the solver's; exact, no projection);
    ``kind="density"`` returns the density callable ρ(x) = Σ clm Y_lm(x)
    (`meanfield.measures.densities.HarmonicSeries`) for every solver on S^2. The solvers check that ρ is
    non-negative with mass ∫ρ dσ = clm[0, 0, 0] = 1 (or pass ``normalize=True``).

    Parameters
    ----------
    coeffs : pyshtools.SHCoeffs
        Coefficients of a real function on S^2, of any normalisation and phase convention.
    kind : "coefficients" or "density"
        What to return (see above).
    nthreads : int >= 1
        Threads of pyshtools' ducc0 backend.

    Returns
    -------
    (2, lmax + 1, lmax + 1) array or HarmonicSeries
        The real '4pi' coefficients clm, or the density callable.

    Raises
    ------
    ValueError
        ``coeffs`` not a pyshtools.SHCoeffs, of an unknown normalisation, not convertible, or holding
        NaN/inf; an unknown ``kind``.

    Examples
    --------
    >>> import numpy as np
    >>> import pyshtools
    >>> import meanfield as mf
    >>> clm = np.zeros((2, 3, 3)); clm[0, 0, 0] = 1.0; clm[0, 2, 1] = 0.2
    >>> coeffs = pyshtools.SHCoeffs.from_array(clm, normalization="4pi", csphase=1)
    >>> bool(np.array_equal(mf.from_pyshtools(coeffs), clm))
    True
    >>> rho = mf.from_pyshtools(coeffs.convert(normalization="ortho"), kind="density")
    >>> round(float(rho.clm[0, 2, 1]), 12)
    0.2
    """

    pysh = pyshtools_ducc(nthreads)
    if not isinstance(coeffs, pysh.SHCoeffs):
        raise InvalidInput("`coeffs` must be a pyshtools.SHCoeffs (it carries its normalisation; wrap an array with "
                         "pyshtools.SHCoeffs.from_array(array, normalization=..., csphase=...)), got "
                         f"{type(coeffs).__name__}.")
    if kind not in ("coefficients", "density"):
        raise InvalidInput(f"`kind` must be 'coefficients' or 'density', got {kind!r}.")
    if coeffs.normalization not in ("4pi", "ortho", "schmidt", "unnorm") or coeffs.csphase not in (1, -1):
        raise InvalidInput(f"`coeffs` has normalization={coeffs.normalization!r}, csphase={coeffs.csphase!r}; "
                         "expected one of pyshtools' '4pi', 'ortho', 'schmidt', 'unnorm' with csphase 1 or -1.")
    if (coeffs.normalization, coeffs.csphase, coeffs.kind) != (PYSHTOOLS_NORMALIZATION, PYSHTOOLS_CSPHASE, "real"):
        try:        # check=True: pyshtools refuses complex coefficients of a function that is not real
            coeffs = coeffs.convert(normalization=PYSHTOOLS_NORMALIZATION, csphase=PYSHTOOLS_CSPHASE, kind="real",
                                    check=True)
        except (ValueError, RuntimeError) as exc:
            raise InvalidInput(f"`coeffs` could not be converted to real '4pi' coefficients: {exc}") from None
    clm = np.array(coeffs.coeffs, dtype=float)
    if not np.all(np.isfinite(clm)):
        raise InvalidInput("`coeffs` holds NaN or inf.")
    if kind == "density":
        return HarmonicSeries(clm)
    return clm


def from_file(path):
    """The initial density stored in a NetCDF file written by `Solution.save`.

    * A saved Solution (any PDE solver, with or without ``grid=True``): the density of its last saved
      state (`meanfield.measures.densities.StateDensity`, evaluated from the stored coefficients or nodes, not
      from a grid). A layered (causal) state gives `LayeredStateDensity`: ``f(x, s)`` at each token
      position, ``f(x)`` the x-marginal. A run that starts from it starts at t = 0; to continue the saved run instead, pass
      the Solution (or its path) to ``solve``.
    * A file holding only the CF grid variable ``density`` (cell means or point values):
      `meanfield.measures.densities.grid_from_file`, which says what is exact.

    * A copy that kept only the grid (e.g. ``ds[["density"]].to_netcdf(...)`` with xarray, coordinates,
      time and global attributes included) is such a grid file.

    Parameters
    ----------
    path : str or os.PathLike
        A NetCDF file (the ``[initial] density = "file"`` of a run's configuration).

    Returns
    -------
    Density
        A density callable on points of shape (..., d) of the file's sphere.

    Raises
    ------
    ValueError
        Naming ``path`` when the file is missing, not NetCDF, holds a state that no smooth density
        represents (particles, or Lagrangian nodes gathered into clusters,
        `LagrangianNodes.clusters`; the message points to continuing the saved Solution instead), or
        a grid that `grid_from_file` does not read.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import meanfield as mf, solvers
    >>> model = mf.Model(beta=1.0, dim=2)
    >>> rho0 = mf.densities.perturbed_uniform(0.2, 1, dim=2)
    >>> sol = solvers.FourierCircle(model, modes=32).solve(rho0, [0.0, 0.5], progress=False)
    >>> path = sol.save(os.path.join(tempfile.mkdtemp(), "run.nc"))
    >>> rho = mf.from_file(path)
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> bool(np.allclose(rho(x), sol.density(x)))
    True
    """

    is_solution, grid, bounds = read_density_file(path)
    if not is_solution:
        return density_from_grid(path, grid, bounds)
    state = saved_state(path)
    rep, where = state.representation, f"`path` {str(path)!r}"
    go_on = (f"To continue the saved run, pass the Solution to the solver, `solver.solve(mf.load({str(path)!r}), t)`, "
             "or `meanfield run CONFIG --resume DIR`.")
    if not rep.is_density:
        raise InvalidInput(f"{where} holds particles at t = {state.t:g}, which no smooth density represents. {go_on}")
    masses = rep.clusters(state.data)[0] if hasattr(rep, "clusters") else ()
    if len(masses):
        raise InvalidInput(f"{where} holds a clustered state at t = {state.t:g}: {len(masses)} clusters of nodes narrower "
                         f"than {rep.cluster_tol:g} rad carry {float(np.sum(masses)):.6g} of the mass, which no smooth "
                         f"density on a grid represents. {go_on}")
    if getattr(rep, "positions", None) is not None:        # a layered (causal) state: ρ(σ, x)
        return LayeredStateDensity(state, source=str(path))
    return StateDensity(state, source=str(path))


def saved_state(path, i=-1):
    """The state at saved index ``i`` of a file written by `Solution.save`, as a
    `meanfield.representations.State` (its representation, time and model); ValueError naming ``path``
    when the file is damaged."""
    import xarray as xr  # deferred: xarray is heavy

    try:
        with xr.open_dataset(path, engine="netcdf4", decode_times=False) as ds:
            ds.load()
            rep, data = from_dataset(ds)
            t, model = time_values(ds), Model.from_attrs(ds.attrs)
    except (KeyError, ValueError, RuntimeError, OSError) as exc:
        raise InvalidInput(f"`path` {str(path)!r} is a damaged meanfield Solution: {type(exc).__name__}: {exc}") from None
    return State(rep, data[i], t=float(t[i]), model=model)
