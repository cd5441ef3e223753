"""The density on a grid, for tools that know nothing of Fourier or spherical-harmonic series.

`Solution.save(path, grid=True)` writes, next to the coefficients (which `meanfield.load` reads
back), the density ρ (relative to the uniform probability measure σ, docs/mathematics.md §2) at
every saved time on a grid described by the CF conventions (https://cfconventions.org), so that
ncview, Panoply, ParaView, xarray, or a Julia or R script can read it as it is. By default the grid
holds **cell means** μ_t(cell)/σ(cell) (``cell_methods = "time: point theta: mean"``, ``"area: mean"``
on S^2, ``"s: mean"``), with the cells' bounds (``theta_bnds`` ...) and their σ-measures
``cell_weight``: Σ density·cell_weight is the mass at every time, clustered or not (a cluster
narrower than a cell keeps its mass in its cell; point values would miss it). `CellGrid`:

* S^1: ``density(time, theta)``, n cells [2πj/n, 2π(j + 1)/n] centred at θ_j = 2π(j + ½)/n, θ in radians;
* S^2: ``density(time, lat, lon)``, n latitude bands of equal angle × 2n longitude cells, in degrees
  (north, east), area-weighted;
* zonal densities in any d: ``density(time, s)``, s = ⟨x, e⟩ for the axis e of the run, the mean under
  the law of s;
* P1 meshes: the nodal values ``rho(time, vertex)`` are the data; the mesh is described by the
  UGRID conventions (http://ugrid-conventions.github.io/ugrid-conventions/): a mesh topology
  variable (``cf_role = "mesh_topology"``), the connectivity of the cells (``face_node_connectivity``
  on S^2, ``edge_node_connectivity`` on S^1, start index 0) and the node coordinates.

How each solver's cell means are computed: Fourier and spherical-harmonic series exactly (each mode
integrated over the cells; in latitude by Gauss–Legendre points to round-off), Gegenbauer series
exactly (the closed-form law of s), Lagrangian runs by the masses of the labels (the exact
push-forward of the node measure on S^1; each label's pushed-forward cell binned on S^2), particles
by the histogram of their weights. ``grid="points"`` writes point values instead (the midpoints on
S^1, the Gauss–Legendre grid on S^2, equispaced s), ``cell_methods`` "point".

Each coordinate carries ``units``, ``standard_name`` where CF has one (latitude, longitude) or a
``long_name``, and ``axis`` for latitude and longitude. θ is an angle on the circle, not a longitude:
``units = "radian"`` and a ``long_name``, no ``standard_name`` (CF has none for it) and no ``axis``
(``axis = "X"`` would declare it a longitude or a projection coordinate).

Every file `Solution.save` writes, with or without the grid, follows CF-1.11 (`describe`): a long name
for every variable, no fill value on coordinates, ``Conventions``, ``title``, ``history`` and
``source``, and the time coordinate of `TIME_ATTRS` (`cf_time`). The layer depth t of the dynamics is
dimensionless, so the ``time`` coordinate holds t as plain numbers with ``units = "1"``:
``xarray.open_dataset`` gives float t and ``.sel(time=10.0)`` works. It is not declared a CF time
coordinate (no ``standard_name = "time"``, no ``axis = "T"``): CF asks a time coordinate for units
"<unit> since <date>", which would make every reader decode t as a date. Files written before
carry t as "seconds since 1970-01-01"; `time_values` reads both.
"""
import numpy as np

from ..errors import InvalidInput, NoCellMeans
from ..version import __version__

CONVENTIONS = "CF-1.11"      # the first CF version that includes UGRID
# The time coordinate: t as a dimensionless number (module docstring); TIME_EPOCH reads older files.
TIME_EPOCH = "1970-01-01 00:00:00"
TIME_ATTRS = {"long_name": "layer depth t of the dynamics (dimensionless)", "units": "1",
              "comment": "t is dimensionless, so it is stored as a plain number with units 1 (not as a CF time "
                         "since a reference date): xarray.open_dataset gives float t and .sel(time=10.0) works"}
# The one failed high-priority check of the IOOS compliance checker that the files accept (docs/output.md):
# its section 5.1 check takes a coordinate *named* time for a time axis and asks it for
# standard_name = "time", which would make it a CF time with units "<unit> since <date>".
CF_ACCEPTED_FAILURE = "Coordinate variable 'time' should have standard_name='time'"
# θ on S^1: an angle on the circle, x = (cos θ, sin θ). Not a longitude: no axis, no standard_name.
THETA_ATTRS = {"units": "radian", "long_name": "angle theta on the circle, x = (cos theta, sin theta)"}
LAT_ATTRS = {"units": "degrees_north", "standard_name": "latitude", "long_name": "latitude", "axis": "Y"}
LON_ATTRS = {"units": "degrees_east", "standard_name": "longitude", "long_name": "longitude", "axis": "X"}
# σ of a layered (causal) run: the position of a token as a fraction of the sequence (docs/causal.md)
POSITION_ATTRS = {"units": "1", "long_name": "token position sigma in (0, 1], the fraction of the sequence"}
UGRID = "UGRID-1.0"
DENSITY_NAME = "density"
_DENSITY_ATTRS = {"long_name": "density relative to the uniform probability measure sigma on the sphere",
                  "units": "1"}
# long names of the variables the representations and `Solution.to_xarray` write (CF 3.3 recommends one)
LONG_NAMES = {
    "mass": "total mass, the integral of rho d sigma",
    "energy": "interaction energy E_beta (3.5)",
    "rho_hat_real": "real part of the Fourier coefficients c_k of rho, relative to sigma",
    "rho_hat_imag": "imaginary part of the Fourier coefficients c_k of rho, relative to sigma",
    "k": "Fourier wave number",
    "clm": "real spherical-harmonic coefficients of rho, orthonormal in L2(sigma)",
    "cs": "0: cos(m phi) coefficients, 1: sin(m phi) coefficients",
    "l": "spherical-harmonic degree",
    "m": "spherical-harmonic order",
    "rho": "nodal values of the P1 density relative to sigma_h",
    "vertices": "Cartesian coordinates of the mesh vertices (on the unit sphere)",
    "cells": "vertices of each cell of the mesh",
    "gegenbauer_coefficients": "coefficients of rho in normalised Gegenbauer polynomials of <x, axis>",
    "positions": "positions of the particles or nodes on the unit sphere",
    "weights": "masses of the particles or nodes",
    "log_jacobian": "logarithm of the Jacobian of the flow at the nodes",
    "labels": "initial positions of the nodes",
    "rho0": "initial density at the nodes",
    "position_weight": "quadrature weight of each token position (composite Gauss-Legendre, summing to 1)",
    "position_panel_end": "ends of the panels of the quadrature rule in the token position sigma",
    "mass_per_position": "mass of the density at each token position",
    "energy_per_position": "interaction energy E_beta (3.5) of the density at each token position",
}


def _points_of(coords):
    """Unit vectors at the points of a grid given by its coordinates (theta, or lat/lon in degrees)."""
    if "theta" in coords:
        th = np.asarray(coords["theta"], dtype=float)
        return np.stack([np.cos(th), np.sin(th)], -1)
    lat, lon = np.radians(np.asarray(coords["lat"], dtype=float)), np.radians(np.asarray(coords["lon"], dtype=float))
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    return np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], -1)


def grid_points(ds):
    """Unit vectors at the grid points of a Dataset written with ``grid=True`` (for checks)."""
    return _points_of({k: ds[k].values for k in ("theta", "lat", "lon") if k in ds.coords})


def _slices(sol):
    for seg in getattr(sol, "segments", [sol]):
        for data in seg.data:
            yield seg.representation, data


def grid_kind(grid):
    """The kind of grid ``Solution.save(grid=...)`` asks for: True or "means" → "means" (cell means, the
    default), "points" → point values; False/None → None (no grid). ValueError naming `grid` else."""
    if grid is None or grid is False:
        return None
    if grid is True:
        return "means"
    if isinstance(grid, str) and grid in CELL_KINDS:
        return grid
    raise InvalidInput(f"`grid` must be True (cell means), False, 'means' or 'points', got {grid!r}.")


def grid_variables(sol, n=None, kind="means"):
    """(data_vars, coords, attrs) to merge into ``sol.to_xarray()``: the density on a grid at every saved
    time (P1: the UGRID mesh description and its nodal values).

    ``kind="means"``: the mean density over each cell of the representation's `CellGrid` (``cells(n)``,
    ``cell_means``), ``cell_methods = "time: point <dims>: mean"``, with the cells' bounds and their
    σ-measures ``cell_weight``: Σ density·cell_weight is the mass at every time, clustered or not.
    ``kind="points"``: the values at the points of ``to_grid(data, n)``, ``cell_methods`` "point";
    when the segments of a run have different point grids, the later ones are evaluated at the points
    of the first segment's grid (``Solution.density``), so every time shares one grid.
    """
    rep = sol.representation
    if rep.on_mesh:
        return ugrid_variables(rep)
    if kind == "means":
        return _cell_mean_variables(sol, n)
    if not rep.is_density:
        raise InvalidInput("`grid`='points' writes density values; a particle Solution has none (grid=True writes the "
                         "histogram of the particles' weights as cell means).")
    rows, first = [], None
    for i, (r, data) in enumerate(_slices(sol)):
        if not hasattr(r, "to_grid"):
            raise InvalidInput(f"`grid`: representation {r.name!r} has no grid of density values.")
        da = r.to_grid(data, n if first is None else first.shape[0])     # later slices: the first grid's size
        if first is None:
            first = da
        elif da.dims != first.dims or any(not np.array_equal(da[c].values, first[c].values) for c in first.dims):
            if first.dims[0] == "s":
                raise InvalidInput("`grid`: the segments of this run have different zonal grids.")
            da = first.copy(data=np.asarray(sol.density(_points_of({c: first[c].values for c in first.dims}), i)))
        rows.append(np.asarray(da.values, dtype=float))
    dims = ("time",) + tuple(first.dims)
    attrs = dict(_DENSITY_ATTRS)
    attrs.update({k: v for k, v in first.attrs.items() if k not in ("long_name", "units")})
    attrs["cell_methods"] = "time: point " + " ".join(f"{d}: point" for d in first.dims)
    data_vars = {DENSITY_NAME: (dims, np.stack(rows), attrs)}
    coords = {c: (c, first[c].values, dict(first[c].attrs)) for c in first.dims}
    return data_vars, coords, {"Conventions": CONVENTIONS}


_MEAN_ATTRS = {"long_name": "mean density over each grid cell, relative to the uniform probability measure sigma "
                            "(the mass of a cell is density * cell_weight)", "units": "1"}


def _cell_mean_variables(sol, n=None):
    """The cell means of every saved time on one `CellGrid` (that of the first segment)."""
    grid, rows = None, []
    for r, data in _slices(sol):
        g = r.cells(n if grid is None else grid.shape[0])
        if grid is None:
            grid = g
        elif not g.same_as(grid):
            raise InvalidInput("`grid`: the segments of this run have different cell grids.")
        try:
            rows.append(np.asarray(r.cell_means(data, grid), dtype=float))
        except NoCellMeans:
            raise InvalidInput(f"`grid`: representation {r.name!r} has no cell means.") from None
    coords, bounds, (wname, weight) = grid.variables()
    attrs = dict(_MEAN_ATTRS, cell_methods="time: point " + grid.cell_methods)
    zonal = getattr(sol.representation, "axis", None)
    if grid.dims == ("s",) and zonal is not None:
        attrs["zonal_axis"] = np.asarray(zonal).tolist()
    data_vars = {DENSITY_NAME: (("time",) + grid.dims, np.stack(rows), attrs), wname: weight}
    data_vars.update(bounds)
    return data_vars, coords, {"Conventions": CONVENTIONS}


def ugrid_variables(rep):
    """The UGRID description of a P1 mesh on S^1 (1-D network, edges) or S^2 (2-D faces): mesh
    topology ``mesh``, node coordinates and the connectivity attributes on ``cells``; the nodal
    values ``rho`` are the data on the nodes."""
    v = rep.vertices
    if rep.dim == 3:
        lon = np.degrees(np.arctan2(v[:, 1], v[:, 0]))
        lat = np.degrees(np.arcsin(np.clip(v[:, 2], -1.0, 1.0)))
        nodes = {"mesh_node_lon": ("vertex", lon, dict(LON_ATTRS, long_name="longitude of the mesh nodes")),
                 "mesh_node_lat": ("vertex", lat, dict(LAT_ATTRS, long_name="latitude of the mesh nodes"))}
        topology = {"topology_dimension": 2, "node_coordinates": "mesh_node_lon mesh_node_lat",
                    "face_node_connectivity": "cells", "face_dimension": "cell"}
        connectivity = {"cf_role": "face_node_connectivity", "start_index": 0,
                        "long_name": "vertices of each triangle of the icosphere, counter-clockwise"}
    else:
        theta = np.mod(np.arctan2(v[:, 1], v[:, 0]), 2 * np.pi)
        nodes = {"mesh_node_theta": ("vertex", theta, dict(THETA_ATTRS, long_name="angle theta of the mesh nodes "
                                                                                  "on the circle"))}
        topology = {"topology_dimension": 1, "node_coordinates": "mesh_node_theta",
                    "edge_node_connectivity": "cells", "edge_dimension": "cell"}
        connectivity = {"cf_role": "edge_node_connectivity", "start_index": 0,
                        "long_name": "the two vertices of each segment of the polygon"}
    topology.update({"cf_role": "mesh_topology", "long_name": "piecewise-flat mesh of the sphere (vertices on the sphere)"})
    data_vars = {"mesh": ((), np.int32(0), topology)}
    coords = dict(nodes)
    var_attrs = {"rho": dict(_DENSITY_ATTRS, mesh="mesh", location="node", coordinates=" ".join(nodes),
                             cell_methods="time: point"),
                 "cells": connectivity}
    return data_vars, coords, {"Conventions": f"{CONVENTIONS} {UGRID}", "_variable_attrs": var_attrs}


def add_grid(ds, sol, n=None, kind="means"):
    """``ds`` (from `Solution.to_xarray`) with the density on a grid (see `grid_variables`)."""
    data_vars, coords, attrs = grid_variables(sol, n, kind)
    var_attrs = attrs.pop("_variable_attrs", {})
    ds = ds.assign_coords({k: (dims, vals, a) for k, (dims, vals, a) in coords.items()})
    for k, (dims, vals, a) in data_vars.items():
        ds[k] = (dims, vals, a)
    for k, a in var_attrs.items():
        ds[k].attrs.update(a)
    ds.attrs.update(attrs)
    return describe(ds, sol, grid=True)


def describe(ds, sol, grid=False):
    """``ds`` (from `Solution.to_xarray`) with the CF-1.11 description every saved file carries: the
    time coordinate (`TIME_ATTRS`), and what `describe_dataset` adds to any Dataset.

    In memory the time coordinate holds t as plain numbers (``units = "1"``); `cf_time` gives it the
    CF time attributes when the Dataset is written (`Solution.save`)."""
    ds["time"].attrs.update(long_name=TIME_ATTRS["long_name"], units="1")
    what = "density on a grid" if grid else "coefficients"
    return describe_dataset(ds, title=f"meanfield Solution: {sol.solver or sol.representation.name}, {sol.model!r}, "
                                      f"{what}",
                            history=f"Solution.save{' with grid=True' if grid else ''}")


def describe_dataset(ds, title, history=""):
    """``ds`` with what CF-1.11 asks of any file the project writes (an experiment's results as well
    as a Solution): a long name for every variable that has neither one nor a standard name (CF 3.3;
    `LONG_NAMES`, else the variable's name in words; cell bounds get none, CF 7.1), no fill value on
    coordinates (CF 2.5.1) or bounds, and
    the global ``Conventions``, ``title``, ``history`` and ``source`` (CF 2.6) where not set.
    A coordinate named ``time`` should be t and get `cf_time` when written. Returns ``ds`` (changed)."""
    bounds = {var.attrs["bounds"] for var in ds.variables.values() if "bounds" in var.attrs}
    for name in bounds & set(ds.variables):       # CF 7.1: bounds inherit their coordinate's description
        ds[name].encoding["_FillValue"] = None
    for name, var in ds.variables.items():
        if name not in bounds and "long_name" not in var.attrs and "standard_name" not in var.attrs:
            var.attrs["long_name"] = LONG_NAMES.get(name) or (f"diagnostic {name[5:]}" if name.startswith("diag_")
                                                                else name.replace("_", " "))
    for name in ds.coords:
        ds[name].encoding["_FillValue"] = None          # CF 2.5.1: coordinates have no missing values
    ds.attrs.setdefault("Conventions", CONVENTIONS)
    ds.attrs.setdefault("title", title)
    ds.attrs.setdefault("history", f"written by meanfield {__version__}" + (f" ({history})" if history else ""))
    ds.attrs.setdefault("source", "meanfield: mean-field self-attention dynamics on the sphere")
    return ds


def describe_file(ds, title, history=""):
    """A copy of any Dataset the project writes (experiment results, sweep cells), described for
    CF-1.11: `describe_dataset`, and `cf_time` when it has a ``time`` coordinate (the layer depth t)."""
    ds = describe_dataset(ds.copy(), title=title, history=history)
    return cf_time(ds) if "time" in ds.coords else ds


def cf_time(ds):
    """``ds`` with the time coordinate described as CF requires (`TIME_ATTRS`), for writing: the
    values stay t."""
    ds = ds.copy()
    ds["time"].attrs.update(TIME_ATTRS)
    return ds


def time_values(ds):
    """The times t of a Dataset written by `Solution.save`, as floats, whether its time coordinate was
    read as numbers (``decode_times=False``, `meanfield.load`) or decoded as dates (xarray's default):
    a date is t seconds after `TIME_EPOCH`."""
    t = np.asarray(ds["time"].values)
    if np.issubdtype(t.dtype, np.datetime64):
        return (t - np.datetime64(TIME_EPOCH.replace(" ", "T"))) / np.timedelta64(1, "s")
    if t.dtype == object and t.size and hasattr(t.flat[0], "year"):       # cftime dates
        import cftime  # deferred: xarray's cftime is heavy

        return np.asarray(cftime.date2num(t, TIME_ATTRS["units"], calendar=TIME_ATTRS["calendar"]), dtype=float)
    return t.astype(float)


# -- cell means ---------------------------------------------------------------------------------------
CELL_KINDS = ("means", "points")     # what `Solution.save(grid=...)` writes: cell means (default) or point values


class CellGrid:
    """A grid of cells covering the sphere (or the interval of s = ⟨x, e⟩), with CF bounds.

    ``dims`` the grid's dimension names; ``centres[d]`` and ``bounds[d]`` (k, 2) per dimension;
    ``weights`` (the grid's shape): σ of each cell (the law of s for a zonal grid), summing to 1,
    so that the mass of a cell-mean grid ρ̄ is Σ ρ̄·weights.

    * S^1 (`circle_cells`): n cells [2πj/n, 2π(j + 1)/n], centres θ_j = 2π(j + ½)/n;
    * S^2 (`sphere_cells`): n latitude bands of equal angle (north to south) × 2n longitude cells
      [360j/2n, 360(j + 1)/2n] degrees east, σ(cell) = (sin φ_top − sin φ_bottom)·Δλ/4π;
    * s (`zonal_cells`): cells between given edges in [−1, 1].
    """

    def __init__(self, dims, centres, bounds, weights, attrs, cell_methods):
        self.dims = tuple(dims)
        self.centres = {d: np.asarray(centres[d], dtype=float) for d in self.dims}
        self.bounds = {d: np.asarray(bounds[d], dtype=float) for d in self.dims}
        self.weights = np.asarray(weights, dtype=float)
        self.attrs = attrs
        self.cell_methods = cell_methods

    @property
    def shape(self):
        return tuple(self.centres[d].size for d in self.dims)

    def same_as(self, other):
        return self.dims == other.dims and all(np.array_equal(self.bounds[d], other.bounds[d]) for d in self.dims)

    def dataarray(self, values, name="rho"):
        """``values`` (the grid's shape) as a DataArray with the cell centres as coordinates and
        ``cell_methods`` (the bounds are ``self.bounds``; `variables` writes them for a file)."""
        import xarray as xr  # deferred: xarray is heavy

        da = xr.DataArray(np.asarray(values, dtype=float), coords={d: self.centres[d] for d in self.dims},
                          dims=self.dims, name=name)
        for d in self.dims:
            da[d].attrs.update(self.attrs[d])
        da.attrs.update(long_name="mean density over each cell, relative to the uniform probability measure",
                        units="1", cell_methods=self.cell_methods)
        return da

    def variables(self):
        """(coords, bounds variables, weight variable) for a file: each coordinate with its ``bounds``
        attribute (CF 7.1), the bounds ``<dim>_bnds`` (dims (dim, nv)) and ``cell_weight``."""
        coords = {d: (d, self.centres[d], dict(self.attrs[d], bounds=f"{d}_bnds")) for d in self.dims}
        bounds = {f"{d}_bnds": ((d, "nv"), self.bounds[d], {}) for d in self.dims}
        what = "law of s" if self.dims == ("s",) else "uniform probability measure sigma"
        weight = ("cell_weight", (self.dims, self.weights,
                                  {"long_name": f"measure of each cell under the {what}: the mass of a cell is "
                                                "density * cell_weight, and the weights sum to 1", "units": "1"}))
        return coords, bounds, weight


def _edges_bounds(edges):
    return np.stack([edges[:-1], edges[1:]], axis=-1)


def circle_cells(n):
    """The `CellGrid` of n equal cells on S^1 (θ in radians)."""
    n = int(n)
    edges = 2 * np.pi * np.arange(n + 1) / n
    return CellGrid(("theta",), {"theta": 0.5 * (edges[:-1] + edges[1:])}, {"theta": _edges_bounds(edges)},
                    np.full(n, 1.0 / n), {"theta": THETA_ATTRS}, "theta: mean")


def sphere_cells(n):
    """The `CellGrid` of n equal-angle latitude bands × 2n longitude cells on S^2 (degrees)."""
    n = int(n)
    lat_e = 90.0 - 180.0 * np.arange(n + 1) / n
    lon_e = 360.0 * np.arange(2 * n + 1) / (2 * n)
    band = 0.5 * (np.sin(np.radians(lat_e[:-1])) - np.sin(np.radians(lat_e[1:])))      # σ of each band
    weights = np.repeat(band[:, None] / (2 * n), 2 * n, axis=1)
    attrs = {"lat": dict(LAT_ATTRS), "lon": dict(LON_ATTRS)}
    return CellGrid(("lat", "lon"), {"lat": 0.5 * (lat_e[:-1] + lat_e[1:]), "lon": 0.5 * (lon_e[:-1] + lon_e[1:])},
                    {"lat": _edges_bounds(lat_e), "lon": _edges_bounds(lon_e)}, weights, attrs, "area: mean")


def zonal_cells(edges, weights):
    """The `CellGrid` of cells in s = ⟨x, e⟩ between ``edges`` (increasing, in [−1, 1]); ``weights`` the law
    of s of each cell."""
    edges = np.asarray(edges, dtype=float)
    attrs = {"s": {"long_name": "s = <x, e>, the coordinate along the axis e", "units": "1"}}
    return CellGrid(("s",), {"s": 0.5 * (edges[:-1] + edges[1:])}, {"s": _edges_bounds(edges)}, weights, attrs,
                    "s: mean")


def cell_grid_of(dim, n):
    """`circle_cells` (dim 2) or `sphere_cells` (dim 3) with n cells (latitude bands)."""
    if dim == 2:
        return circle_cells(n)
    if dim == 3:
        return sphere_cells(n)
    raise InvalidInput(f"cell grids are on S^1 and S^2; got dim = {dim}.")


def bin_masses(grid, points, masses):
    """The masses of weighted points summed in the cells of ``grid`` (S^1 or S^2), shape grid.shape:
    each point in the cell that contains it (exact: the sum is the points' total)."""
    x = np.asarray(points, dtype=float)
    m = np.asarray(masses, dtype=float).ravel()
    x = x.reshape(-1, x.shape[-1])
    if grid.dims == ("theta",):
        n = grid.shape[0]
        j = np.floor(np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi) * n / (2 * np.pi)).astype(np.int64) % n
        return np.bincount(j, weights=m, minlength=n)
    n, nlon = grid.shape
    z = np.clip(x[:, 2] / np.maximum(np.linalg.norm(x, axis=1), 1e-300), -1.0, 1.0)
    colat = np.arccos(z)
    i = np.clip(np.floor(colat * n / np.pi).astype(np.int64), 0, n - 1)
    j = np.floor(np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi) * nlon / (2 * np.pi)).astype(np.int64) % nlon
    return np.bincount(i * nlon + j, weights=m, minlength=n * nlon).reshape(n, nlon)
