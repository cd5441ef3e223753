"""`meanfield.from_file` on grid-only files: point values, and the cell means that
`Solution.save(grid=True)` writes (S^1: exact sinc deconvolution; S^2: `CellMeans`, exact cell means)."""
import numpy as np
import pytest
import xarray as xr

import meanfield as mf
import solvers
from meanfield.spaces.gridded import circle_cells, sphere_cells
from meanfield.spaces.quadrature import fibonacci, trapezoid


def _grid_only(sol, path, **save):
    """``sol`` saved with a grid, then only the grid kept (density, bounds, cell_weight; no global attrs)."""
    sol.save(path, **save)
    with xr.open_dataset(path, decode_times=False) as ds:
        keep = [v for v in ds.data_vars if v in ("density", "cell_weight") or v.endswith("_bnds")]
        out = ds[keep].load()
    out.attrs = {}
    out.to_netcdf(str(path) + ".grid.nc")
    return str(path) + ".grid.nc"


@pytest.fixture(scope="module")
def circle():
    rho = mf.densities.fourier_modes([[1, 0.3, 0.2], [3, 0.2, 1.0], [7, 0.1, -0.5]])
    return solvers.FourierCircle(mf.Model(beta=1.0, dim=2), modes=16).solve(rho, [0.0], progress=False)


def test_circle_cell_means_round_trip(circle, tmp_path):
    """A band-limited density (degree 7 < n/2) through save(grid=True) (cell means) and from_file: its
    midpoint values to 1e-12, mass 1, and FourierCircle starts from its exact coefficients."""
    path = _grid_only(circle, tmp_path / "c.nc", grid=True, grid_size=24)
    with xr.open_dataset(path, decode_times=False) as ds:
        assert "mean" in ds["density"].attrs["cell_methods"]
    g = mf.from_file(path)
    assert isinstance(g, mf.densities.GridValues)
    np.testing.assert_allclose(g.values, circle.state(-1).density(trapezoid(24).points), rtol=0, atol=1e-12)
    assert abs(g.mass - 1.0) < 1e-14
    again = solvers.FourierCircle(mf.Model(beta=1.0, dim=2), modes=16).solve(g, [0.0], progress=False)
    np.testing.assert_allclose(again.data[0], circle.data[-1], rtol=0, atol=1e-13)


def test_circle_bounds_without_cell_methods_are_means(circle, tmp_path):
    """A file that lost the attributes but kept ``theta_bnds``: still read as cell means."""
    path = _grid_only(circle, tmp_path / "c.nc", grid=True, grid_size=24)
    with xr.open_dataset(path, decode_times=False) as ds:
        ds = ds.load()
    del ds["density"].attrs["cell_methods"]
    ds.to_netcdf(tmp_path / "bare.nc")
    g = mf.from_file(tmp_path / "bare.nc")
    np.testing.assert_allclose(g.values, circle.state(-1).density(trapezoid(24).points), rtol=0, atol=1e-12)


def test_circle_points_still_read_as_points(circle, tmp_path):
    g = mf.from_file(_grid_only(circle, tmp_path / "p.nc", grid="points", grid_size=24))
    np.testing.assert_allclose(g.values, circle.state(-1).density(trapezoid(24).points), rtol=0, atol=1e-14)


def test_circle_means_of_a_cluster_are_refused(tmp_path):
    """Cell means that no band-limited density reproduces non-negatively (all mass in one cell)."""
    means = np.zeros(16)
    means[3] = 16.0
    cells = circle_cells(16)
    coords, bounds, (wname, weight) = cells.variables()
    ds = xr.Dataset({"density": (("theta",), means, {"cell_methods": "theta: mean"}), **bounds, wname: weight},
                    coords=coords)
    ds.to_netcdf(tmp_path / "cluster.nc")
    with pytest.raises(ValueError, match="`path`.*band-limited density with these 16 cell means is negative"):
        mf.from_file(tmp_path / "cluster.nc")


def _sphere_cell_means(rho, n):
    """The cell means of a density on `sphere_cells(n)` by 3 x 3 Gauss points per cell in (z, λ)
    (exact for `CellMeans`: its band integrals are quadratic in λ, it is quadratic in z)."""
    g, gw = np.polynomial.legendre.leggauss(3)
    cells = sphere_cells(n)
    z = np.sin(np.radians(cells.bounds["lat"]))                   # (n, 2) top, bottom
    lam = np.radians(cells.bounds["lon"])                          # (2n, 2)
    zq = 0.5 * (z[:, 0] + z[:, 1])[:, None] + 0.5 * (z[:, 0] - z[:, 1])[:, None] * g      # (n, 3)
    lq = 0.5 * (lam[:, 0] + lam[:, 1])[:, None] + 0.5 * (lam[:, 1] - lam[:, 0])[:, None] * g
    Z, L = zq[:, :, None, None], lq[None, None, :, :]
    r = np.sqrt(1 - Z ** 2)
    x = np.stack(np.broadcast_arrays(r * np.cos(L), r * np.sin(L), Z), -1)      # (n, 3, 2n, 3, 3)
    w = np.multiply.outer(gw, gw) / 4                                           # mean over the cell
    return np.einsum("iajb,ab->ij", rho(x), w)


@pytest.fixture(scope="module")
def sphere():
    return solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3), lmax=24).solve(
        mf.densities.von_mises_fisher([0.0, 0.6, 0.8], 3.0), [0.0], progress=False)


def test_sphere_cell_means_exact_and_converging(sphere, tmp_path):
    """S^2 cell means (area: mean): `CellMeans` keeps the file's cell means to round-off and mass 1 to
    1e-12; its point error against the true density falls as O(h²) away from the polar bands (measured
    0.51, 0.14, 0.035 for n = 8, 16, 32) and at least as O(h) in them."""
    pts = fibonacci(4000).points
    exact = sphere.state(-1).density(pts)
    errors = {}
    for n in (8, 16):
        path = _grid_only(sphere, tmp_path / f"s{n}.nc", grid=True, grid_size=n)
        with xr.open_dataset(path, decode_times=False) as ds:
            means = ds["density"].values[-1]
        rho = mf.from_file(path)
        assert isinstance(rho, mf.densities.CellMeans)
        np.testing.assert_allclose(_sphere_cell_means(rho, n), means, rtol=0, atol=1e-12 * means.max())
        assert abs(rho.mass - 1.0) < 1e-12
        assert rho(pts).min() >= 0
        polar = np.abs(pts[:, 2]) > np.cos(np.pi / n)
        err = np.abs(rho(pts) - exact)
        errors[n] = err[~polar].max(), err.max()
    assert errors[8][0] / errors[16][0] > 3.2            # O(h²) outside the polar bands (measured 3.6)
    assert errors[8][1] / errors[16][1] > 2.0            # O(h) at least everywhere (measured 2.7)


def test_sphere_points_still_read_as_points(sphere, tmp_path):
    g = mf.from_file(_grid_only(sphere, tmp_path / "p.nc", grid="points", grid_size=26))
    assert isinstance(g, mf.densities.GridValues)
    again = solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3), lmax=24).solve(g, [0.0], progress=False)
    np.testing.assert_allclose(again.data[0], sphere.data[-1], rtol=0, atol=1e-12)


def _write(tmp_path, name, dims, values, coords, attrs):
    xr.Dataset({"density": (dims, values, attrs)}, coords=coords).to_netcdf(tmp_path / name)
    return tmp_path / name


def test_bad_grid_files(tmp_path):
    cells = circle_cells(8)
    theta = {"theta": cells.centres["theta"]}
    unknown = _write(tmp_path, "u.nc", ("theta",), np.ones(8), theta, {"cell_methods": "theta: maximum"})
    with pytest.raises(ValueError, match=r"`path` .*u\.nc.*cell_methods 'theta: maximum'"):
        mf.from_file(unknown)
    shifted = _write(tmp_path, "sh.nc", ("theta",), np.ones(8), {"theta": cells.centres["theta"] + 0.1},
                     {"cell_methods": "theta: mean"})
    with pytest.raises(ValueError, match=r"`path` .*sh\.nc.*`theta` coordinate is not the cells of .*circle_cells"):
        mf.from_file(shifted)
    zonal = _write(tmp_path, "z.nc", ("s",), np.ones(5), {"s": np.linspace(-0.8, 0.8, 5)}, {"cell_methods": "s: mean"})
    with pytest.raises(ValueError, match=r"`path` .*z\.nc.*zonal grid in s"):
        mf.from_file(zonal)
    xr.Dataset({"rho": (("theta",), np.ones(8))}, coords=theta).to_netcdf(tmp_path / "n.nc")
    with pytest.raises(ValueError, match=r"`path` .*n\.nc.*`density` variable"):
        mf.from_file(tmp_path / "n.nc")
    lat = {"lat": sphere_cells(4).centres["lat"], "lon": sphere_cells(4).centres["lon"]}
    negative = _write(tmp_path, "neg.nc", ("lat", "lon"), -np.ones((4, 8)), lat, {"cell_methods": "area: mean"})
    with pytest.raises(ValueError, match=r"`path` .*neg\.nc.*non-negative"):
        mf.from_file(negative)


@pytest.fixture(scope="module")
def clustered(tmp_path_factory):
    """A Lagrangian run on S^1 (β = 5) whose nodes have gathered into three clusters, saved."""
    path = tmp_path_factory.mktemp("clustered") / "lag.nc"
    sol = solvers.Lagrangian(mf.Model(beta=5.0, dim=2), nodes=128).solve(
        mf.densities.perturbed_uniform(0.2, 3), [0.0, 15.0], progress=False)
    sol.save(path, grid=True)
    return sol, path


def test_a_clustered_state_is_refused_and_points_to_continuing(clustered):
    """No smooth density carries clusters of nodes: from_file says so, names the clusters' mass (all
    of it), points to continuing the saved Solution, and never offers to rescale (which would drop it)."""
    sol, path = clustered
    masses, _ = sol.representation.clusters(sol.data[-1])
    assert len(masses) == 3 and abs(masses.sum() - 1) < 1e-12
    with pytest.raises(ValueError) as info:
        mf.from_file(path)
    msg = str(info.value)
    assert msg.startswith(f"`path` {str(path)!r} holds a clustered state at t = 15: 3 clusters of nodes narrower "
                          "than 0.001 rad carry 1 of the mass, which no smooth density")
    assert f"`solver.solve(mf.load({str(path)!r}), t)`" in msg and "--resume" in msg
    assert "normalize" not in msg and len(msg.splitlines()) == 1
    again = solvers.Lagrangian(mf.Model(beta=5.0, dim=2), nodes=128).solve(mf.load(path), [15.0, 15.5],
                                                                            progress=False)
    assert again.t[0] == 15.0 and abs(again.mass[-1] - 1) < 1e-12          # the advice works


def test_particles_are_refused_and_point_to_continuing(tmp_path):
    sol = solvers.Particles(mf.Model(beta=3.0, dim=2)).solve(mf.sampling.uniform_points(8, 2, 0), [0.0],
                                                              progress=False)
    sol.save(tmp_path / "p.nc")
    with pytest.raises(ValueError, match=r"^`path` .* holds particles at t = 0, which no smooth density represents\. "
                                         r"To continue the saved run") as info:
        mf.from_file(tmp_path / "p.nc")
    assert "normalize" not in str(info.value)


@pytest.mark.parametrize("grid", ["points", True])
def test_a_grid_copy_made_with_xarray_is_read(circle, tmp_path, grid):
    """``ds[["density"]].to_netcdf(...)`` keeps the coordinates, the time and the global attributes but
    not the Solution's variables: read as the grid it holds (the same as the copy that kept the bounds)."""
    circle.save(tmp_path / "s.nc", grid=grid, grid_size=24)
    with xr.open_dataset(tmp_path / "s.nc") as ds:                     # plain xarray, as a user would
        assert "time" in ds["density"].coords and ds.attrs["representation"] == "fourier"
        ds[["density"]].to_netcdf(tmp_path / "copy.nc")
    g = mf.from_file(tmp_path / "copy.nc")
    assert isinstance(g, mf.densities.GridValues)
    np.testing.assert_allclose(g.values, circle.state(-1).density(trapezoid(24).points), rtol=0, atol=1e-12)
