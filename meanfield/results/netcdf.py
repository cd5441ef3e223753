"""A `Solution` as a file: the xarray Dataset of a run (CF-1.11) and its NetCDF-4 file.

`SolutionFiles` holds the methods `Solution.to_xarray`, `Solution.save` and `Solution.from_xarray`
(docs/output.md); `meanfield.load` (`meanfield.results.solution.load`) reads a file back.
"""
import json
import os

import numpy as np

from ..spaces.gridded import add_grid, cf_time, describe, grid_kind, time_values
from ..transformer.model import Model
from ..representations import from_dataset
from ..observables.diagnostics import add_cluster_variables
from ..representations.segments import Segments
from ..serialization import jsonable
from ..version import __version__

# arrays among a Solution's stats (the inputs of its run: `token_positions`, a solve-level MLP) are written as
# variables input_<key>, read back into the stats; a continuation takes them up (docs/restart.md)
INPUT_PREFIX = "input_"


class SolutionFiles:
    """The file of a `Solution` (mixed into it): its Dataset, its NetCDF file, and back."""

    def to_xarray(self, grid=False, grid_size=None, clusters=False):
        """An xarray.Dataset: the state, energy, mass, diagnostics; model parameters in attrs.

        ``grid=True`` (or ``"means"``) adds the mean density over each cell of a grid described by
        the CF conventions (θ in radians on S^1, lat/lon in degrees on S^2, s = ⟨x, e⟩ for zonal
        runs; ``cell_methods`` "mean", with the cells' bounds and σ-measures ``cell_weight``), so that
        the grid's mass Σ density·cell_weight is the run's mass at every saved time, clustered or not,
        for every solver (particles: the histogram of their weights). ``grid="points"`` writes the
        point values instead; P1 meshes write their nodal values with UGRID. ``grid_size``: cells on
        S^1 (and in s), latitude bands on S^2 (default the representation's): see `meanfield.spaces.gridded`.
        ``clusters=True`` (or the dict of `cluster_trajectories`; None like False) adds the clusters
        followed through time: ``cluster_count(time)``, ``cluster_centre(time, cluster, component)``,
        ``cluster_mass(time, cluster)``, ``cluster_width(time, cluster)`` (NaN where a track does not
        exist), ``cluster_linking_distance(time)`` and the merge events as JSON in the attribute
        ``cluster_merges_json``. With or without the grid, the Dataset is described as CF-1.11 asks
        (long names, ``Conventions``, ``title`` ...); its time coordinate holds t as numbers, and `save`
        writes it with the CF time attributes of `meanfield.spaces.gridded.TIME_ATTRS` (t is dimensionless:
        read as dates, it is seconds since 1970).

        Parameters
        ----------
        grid : bool, "means" or "points"
            Add the density on a grid: cell means (True, "means") or point values ("points").
        grid_size : int >= 1, optional
            Cells on S^1 (and in s), latitude bands on S^2.
        clusters : bool, dict or None
            Add the clusters followed through time.

        Returns
        -------
        xarray.Dataset
            Dimension ``time`` (T) and the representation's own; the model's parameters in ``attrs``.

        Raises
        ------
        ValueError
            An unknown ``grid`` or a bad ``grid_size``.

        Examples
        --------
        On S^2 the cells are latitude bands (``grid_size`` of them) times twice as many longitudes:

        >>> import numpy as np
        >>> import meanfield as mf, solvers
        >>> sphere = solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3), lmax=16)
        >>> sol = sphere.solve(mf.densities.perturbed_uniform(0.2, 1, dim=3), [0.0, 1.0], progress=False)
        >>> ds = sol.to_xarray(grid=True, grid_size=16)
        >>> ds.sizes["time"], ds["density"].shape, ds.attrs["model_beta"]
        (2, (2, 16, 32), 1.0)
        >>> mass = (ds["density"] * ds["cell_weight"]).sum(("lat", "lon")).values
        >>> np.round(mass, 12).tolist()
        [1.0, 1.0]
        """
        import xarray as xr  # deferred: xarray is heavy

        rep = self.representation
        data_vars, coords, attrs = (rep.to_dataset(self.data, times=self.t) if isinstance(rep, Segments)
                                    else rep.to_dataset(self.data))
        data_vars, arrays = self._run_variables(data_vars)
        coords = dict(coords)
        coords["time"] = self.t
        ds = self._annotate(xr.Dataset(data_vars, coords=coords), attrs, arrays)
        if clusters is True:
            clusters = self.cluster_trajectories()          # None when there is nothing to follow
        if clusters:                                        # False or None: no clusters
            add_cluster_variables(ds, clusters)
        kind = grid_kind(grid)
        if kind is not None:
            return add_grid(ds, self, grid_size, kind)
        return describe(ds, self)

    def _run_variables(self, data_vars):
        """``data_vars`` (the state's, `Representation.to_dataset`) with the run's own variables beside them:
        ``energy`` and ``mass`` along time, ``diag_<name>`` for each diagnostic saved at every time, the
        ``tracers`` and ``input_<name>`` for each array of the inputs in ``stats`` (token positions, an MLP;
        exact). Returns the variables and those inputs {name: array}."""
        data_vars = dict(data_vars)
        e = np.asarray(self.energy)
        data_vars["energy"] = (("time",) if e.ndim == 1 else ("time", "batch"), e)
        data_vars["mass"] = (("time",), self.mass)
        for k, v in self.diagnostics.items():
            if v.shape[:1] == self.t.shape:
                dims = ("time",) + tuple(f"{k}_dim{j}" for j in range(1, v.ndim))
                data_vars[f"diag_{k}"] = (dims, v)
        if self.tracers is not None:
            data_vars["tracers"] = (("time", "tracer", "tracer_component"), self.tracers)
        arrays = {k: v for k, v in self.stats.items() if isinstance(v, np.ndarray)}
        for k, v in arrays.items():
            data_vars[f"{INPUT_PREFIX}{k}"] = (tuple(f"{INPUT_PREFIX}{k}_dim{j}" for j in range(v.ndim)), v)
        return data_vars, arrays

    def _annotate(self, ds, attrs, arrays):
        """``ds`` with its attributes: the representation's ``attrs``, the model's, the run's (solver, status,
        message, the scalar ``stats`` as JSON, the kernel sums), and the long names of the energy, the
        tracers and the inputs ``arrays``."""
        if self.tracers is not None:
            ds["tracers"].attrs.update(long_name="positions of the passive tracers (the run's flow map applied to "
                                                 "their starts)", units="1")
        for k in arrays:
            ds[f"{INPUT_PREFIX}{k}"].attrs.update(long_name=f"{k} given to solve (read back into Solution.stats; a "
                                                            "continuation of the run takes it up)", units="1")
        ds.attrs.update(attrs)
        ds.attrs.update(self.model.to_attrs())
        ds.attrs.update({"solver": self.solver, "status": self.status, "message": self.message,
                         "stats_json": json.dumps(jsonable({k: v for k, v in self.stats.items() if k not in arrays})),
                         "conventions": "densities relative to the uniform probability measure sigma (meanfield docs/mathematics.md section 2)",
                         "meanfield_version": __version__})
        for key in ("sums", "sums_error_bound"):          # the kernel sums of a particle or Lagrangian run
            if key in self.stats:
                ds.attrs[key] = self.stats[key]
        ds["energy"].attrs["long_name"] = "interaction energy E_beta (3.5)"
        return ds

    def save(self, path, grid=False, grid_size=None, clusters=False):
        """Write the Solution as NetCDF-4 (readable by xarray, netCDF4, ncdump, ...) following CF-1.11;
        ``grid=True`` adds the cell means of the density on a CF-described grid for other tools
        (mass conserved), ``grid="points"`` its point values (see `to_xarray`).

        The time coordinate holds t, described as "seconds since 1970-01-01" because CF has no
        dimensionless time (`meanfield.spaces.gridded.TIME_ATTRS`): `meanfield.load` reads t back as
        numbers; ``xarray.open_dataset`` shows dates unless given ``decode_times=False``.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write (replaced atomically: written aside, then renamed).
        grid : bool, "means" or "points"
            Add the density on a grid (as in `to_xarray`).
        grid_size : int >= 1, optional
            The grid's size (as in `to_xarray`).
        clusters : bool, dict or None
            Add the clusters followed through time (as in `to_xarray`).

        Returns
        -------
        str or os.PathLike
            ``path``.

        Raises
        ------
        ValueError
            As `to_xarray`.

        Examples
        --------
        A particle run with the histogram of its weights on the cells of S^2:

        >>> import os, tempfile
        >>> import numpy as np
        >>> import meanfield as mf, solvers
        >>> x0 = mf.sample(mf.densities.uniform(), 32, 3, rng=0)[0]
        >>> sol = solvers.Particles(mf.Model(beta=1.0, dim=3)).solve(x0, [0.0, 1.0], progress=False)
        >>> path = sol.save(os.path.join(tempfile.mkdtemp(), "run.nc"), grid=True)
        >>> back = mf.load(path)
        >>> bool(np.allclose(back.energy, sol.energy)), back.t.tolist()
        (True, [0.0, 1.0])
        """

        ds = cf_time(self.to_xarray(grid=grid, grid_size=grid_size, clusters=clusters))
        tmp = f"{os.fspath(path)}.{os.getpid()}.tmp"      # written aside, then renamed: a killed run never
        ds.to_netcdf(tmp, engine="netcdf4")                 # leaves a half-written file (checkpoints)
        os.replace(tmp, path)
        return path

    @classmethod
    def from_xarray(cls, ds):
        rep, data = from_dataset(ds)
        diags = {k[5:]: ds[k].values for k in ds.data_vars if k.startswith("diag_")}
        diags["energy"] = ds["energy"].values
        stats = json.loads(ds.attrs.get("stats_json", "{}"))
        stats.update({k[len(INPUT_PREFIX):]: ds[k].values for k in ds.data_vars if k.startswith(INPUT_PREFIX)})
        return cls(time_values(ds), Model.from_attrs(ds.attrs), rep, data, diags, stats, int(ds.attrs.get("status", 0)),
                   ds.attrs.get("message", ""), ds.attrs.get("solver", ""),
                   ds["tracers"].values if "tracers" in ds.data_vars else None)
