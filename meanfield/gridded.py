"""The density on a grid, for tools that know nothing of Fourier or spherical-harmonic series.

`Solution.save(path, grid=True)` writes, next to the coefficients (which `meanfield.load` reads
back), the density ρ (relative to the uniform probability measure σ, docs/mathematics.md §2) at
every saved time on a grid described by the CF conventions (https://cfconventions.org), so that
ncview, Panoply, ParaView, xarray, or a Julia or R script can read it as it is:

* S^1: ``density(time, theta)`` at the midpoints θ_j = 2π(j + ½)/n, θ in radians;
* S^2: ``density(time, lat, lon)``, latitude and longitude in degrees (north, east);
* zonal densities in any d: ``density(time, s)``, s = ⟨x, e⟩ for the axis e of the run;
* P1 meshes: the nodal values ``rho(time, vertex)`` are the data; the mesh is described by the
  UGRID conventions (http://ugrid-conventions.github.io/ugrid-conventions/): a mesh topology
  variable (``cf_role = "mesh_topology"``), the connectivity of the cells (``face_node_connectivity``
  on S^2, ``edge_node_connectivity`` on S^1, start index 0) and the node coordinates.

Each coordinate carries ``units``, ``standard_name`` where CF has one (latitude, longitude) or a
``long_name``, and ``axis`` for latitude and longitude. θ is an angle on the circle, not a longitude:
``units = "radian"`` and a ``long_name``, no ``standard_name`` (CF has none for it) and no ``axis``
(``axis = "X"`` would declare it a longitude or a projection coordinate).

Every file `Solution.save` writes, with or without the grid, follows CF-1.11 (`describe`): a long name
for every variable, no fill value on coordinates, ``Conventions``, ``title``, ``history`` and
``source``, and the time coordinate of `TIME_ATTRS` (`cf_time`). The layer depth t of the dynamics is
dimensionless, but CF has no dimensionless time coordinate, so t is stored as "seconds since
1970-01-01" (see `TIME_ATTRS`): the stored numbers are t itself. `meanfield.load` reads them as
numbers; ``xarray.open_dataset`` decodes them as dates unless given ``decode_times=False``
(`time_values` turns such dates back into t).
"""
import numpy as np

CONVENTIONS = "CF-1.11"      # the first CF version that includes UGRID
# The time coordinate. The layer depth t is dimensionless, and CF has no dimensionless time: a time
# coordinate must have units "<time unit> since <reference time>" (CF 1.11 section 4.4; a units "1"
# is refused), and a dimension called time is identified by standard_name = "time" (section 5.1).
# So t is written as seconds after an arbitrary reference time in a calendar without gaps
# and without leap seconds (proleptic Gregorian, "leap_seconds: none", section 4.4.1): the numbers in
# the file are t, unchanged; "comment" says so.
TIME_EPOCH = "1970-01-01 00:00:00"
TIME_ATTRS = {"standard_name": "time", "long_name": "layer depth t of the dynamics (dimensionless)",
              "units": f"seconds since {TIME_EPOCH}", "calendar": "proleptic_gregorian",
              "units_metadata": "leap_seconds: none", "axis": "T",
              "comment": "t is dimensionless; CF requires a time coordinate in units of time since a reference, "
                         f"so the value t is stored as t seconds since {TIME_EPOCH} (an arbitrary reference)"}
# θ on S^1: an angle on the circle, x = (cos θ, sin θ). Not a longitude: no axis, no standard_name.
THETA_ATTRS = {"units": "radian", "long_name": "angle theta on the circle, x = (cos theta, sin theta)"}
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


def grid_variables(sol, n=None):
    """(data_vars, coords, attrs) to merge into ``sol.to_xarray()``: the density on the grid of the
    representation's ``to_grid(data, n)`` at every saved time (P1: the UGRID mesh description).

    When the segments of a run have different grids, the later ones are evaluated at the points of
    the first segment's grid (``Solution.density``), so every time shares one grid.
    """
    rep = sol.representation
    if not rep.is_density:
        raise ValueError("`grid`=True writes a density on a grid; a particle Solution has none (its positions "
                         "are in the file as they are).")
    if rep.name == "p1":
        return ugrid_variables(rep)
    rows, first = [], None
    for i, (r, data) in enumerate(_slices(sol)):
        if not hasattr(r, "to_grid"):
            raise ValueError(f"`grid`=True: representation {r.name!r} has no grid of density values.")
        da = r.to_grid(data, n if first is None else first.shape[0])     # later slices: the first grid's size
        if first is None:
            first = da
        elif da.dims != first.dims or any(not np.array_equal(da[c].values, first[c].values) for c in first.dims):
            if first.dims[0] == "s":
                raise ValueError("`grid`=True: the segments of this run have different zonal grids.")
            da = first.copy(data=np.asarray(sol.density(_points_of({c: first[c].values for c in first.dims}), i)))
        rows.append(np.asarray(da.values, dtype=float))
    dims = ("time",) + tuple(first.dims)
    attrs = dict(_DENSITY_ATTRS)
    attrs.update({k: v for k, v in first.attrs.items() if k not in ("long_name", "units")})
    attrs["cell_methods"] = "time: point " + " ".join(f"{d}: point" for d in first.dims)
    data_vars = {DENSITY_NAME: (dims, np.stack(rows), attrs)}
    coords = {c: (c, first[c].values, dict(first[c].attrs)) for c in first.dims}
    return data_vars, coords, {"Conventions": CONVENTIONS}


def ugrid_variables(rep):
    """The UGRID description of a P1 mesh on S^1 (1-D network, edges) or S^2 (2-D faces): mesh
    topology ``mesh``, node coordinates and the connectivity attributes on ``cells``; the nodal
    values ``rho`` are the data on the nodes."""
    v = rep.vertices
    if rep.dim == 3:
        lon = np.degrees(np.arctan2(v[:, 1], v[:, 0]))
        lat = np.degrees(np.arcsin(np.clip(v[:, 2], -1.0, 1.0)))
        nodes = {"mesh_node_lon": ("vertex", lon, {"standard_name": "longitude", "long_name": "longitude of the mesh nodes",
                                                   "units": "degrees_east", "axis": "X"}),
                 "mesh_node_lat": ("vertex", lat, {"standard_name": "latitude", "long_name": "latitude of the mesh nodes",
                                                  "units": "degrees_north", "axis": "Y"})}
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


def add_grid(ds, sol, n=None):
    """``ds`` (from `Solution.to_xarray`) with the density on a grid (see `grid_variables`)."""
    data_vars, coords, attrs = grid_variables(sol, n)
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
    `LONG_NAMES`, else the variable's name in words), no fill value on coordinates (CF 2.5.1), and
    the global ``Conventions``, ``title``, ``history`` and ``source`` (CF 2.6) where not set.
    A coordinate named ``time`` should be t and get `cf_time` when written. Returns ``ds`` (changed)."""
    for name, var in ds.variables.items():
        if "long_name" not in var.attrs and "standard_name" not in var.attrs:
            var.attrs["long_name"] = LONG_NAMES.get(name) or (f"diagnostic {name[5:]}" if name.startswith("diag_")
                                                                else name.replace("_", " "))
    for name in ds.coords:
        ds[name].encoding["_FillValue"] = None          # CF 2.5.1: coordinates have no missing values
    ds.attrs.setdefault("Conventions", CONVENTIONS)
    ds.attrs.setdefault("title", title)
    ds.attrs.setdefault("history", f"written by meanfield {ds.attrs.get('meanfield_version', '')} ({history})"
                        if history else "written by meanfield")
    ds.attrs.setdefault("source", "meanfield: mean-field self-attention dynamics on the sphere")
    return ds


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
        import cftime

        return np.asarray(cftime.date2num(t, TIME_ATTRS["units"], calendar=TIME_ATTRS["calendar"]), dtype=float)
    return t.astype(float)
