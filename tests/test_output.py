"""Files other tools read: the density on CF grids (UGRID for P1), and summary.json with the physics."""
import json

import netCDF4
import numpy as np
import pytest
import xarray as xr

import meanfield as mf
import solvers
from meanfield.measures import densities as D
from meanfield.experiments import run as run_experiment
from meanfield.experiments.report import clusters_summary, final_state, tidy
from meanfield.spaces.gridded import grid_points, time_values
from meanfield.representations.p1 import P1Field
from meanfield.representations.particles import ParticleCloud
from solvers.meshes import icosphere, polygon

# (variable, attribute, value) that CF requires of each kind of grid
S1_ATTRS = [("theta", "units", "radian")]
S2_ATTRS = [("lat", "units", "degrees_north"), ("lat", "standard_name", "latitude"), ("lat", "axis", "Y"),
            ("lon", "units", "degrees_east"), ("lon", "standard_name", "longitude"), ("lon", "axis", "X")]
TIME_ATTRS = [("time", "units", "1"), ("time", "long_name", "layer depth t of the dynamics (dimensionless)")]
DENSITY_ATTRS = [("density", "units", "1")] + TIME_ATTRS


@pytest.fixture(scope="module")
def circle():
    return solvers.FourierCircle(mf.Model(beta=3.0, dim=2), modes=32).solve(
        D.perturbed_uniform(0.2, 2), [0.0, 0.3, 0.6], progress=False)


@pytest.fixture(scope="module")
def sphere():
    rho0 = D.mixture([D.von_mises_fisher([0, 0, 1.0], 1.0), D.von_mises_fisher([1.0, 0, 0], 1.0)], [0.6, 0.4])
    return solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3), lmax=24).solve(rho0, [0.0, 0.5], progress=False)


def _p1(dim):
    v, c = polygon(24) if dim == 2 else icosphere(1)
    rho = 1.0 + 0.5 * np.stack([v[:, 0], v[:, 0] ** 2 - 0.2])
    return mf.Solution([0.0, 1.0], mf.Model(beta=1.0, dim=dim), P1Field(v, c), rho, solver="FiniteElements")


def _open_both(path):
    """The file through xarray's CF decoding and through netCDF4 (a second reader, no xarray)."""
    ds = xr.decode_cf(xr.open_dataset(path, decode_cf=False))
    nc = netCDF4.Dataset(path)
    return ds, nc


def _assert_attrs(ds, nc, required):
    for var, key, value in required:
        assert ds[var].attrs.get(key, ds[var].encoding.get(key)) == value, (var, key)
        assert nc[var].getncattr(key) == value, (var, key)
    if "theta" in nc.variables:          # an angle on the circle, not a longitude
        assert not {"axis", "standard_name"} & set(nc["theta"].ncattrs())
    for var in ("theta", "lat", "lon", "density", "time"):
        if var in ds.variables:
            assert ds[var].attrs.get("long_name") or ds[var].attrs.get("standard_name"), var
            assert "_FillValue" not in nc[var].ncattrs() or var == "density", var     # CF 2.5.1 for coordinates


def _assert_grid_values(sol, ds, tol=1e-12):
    x = grid_points(ds)
    for i in range(len(sol.t)):
        err = np.max(np.abs(ds["density"].values[i] - sol.density(x, i)))
        assert err <= tol, (i, err)


@pytest.mark.parametrize("which", ["circle", "sphere"])
def test_grid_is_cf_and_agrees_with_the_density(which, request, tmp_path):
    sol = request.getfixturevalue(which)
    path = sol.save(tmp_path / f"{which}.nc", grid="points")
    ds, nc = _open_both(path)
    with nc:
        assert nc.getncattr("Conventions").startswith("CF-1.11")
        _assert_attrs(ds, nc, (S1_ATTRS if which == "circle" else S2_ATTRS) + DENSITY_ATTRS)
        dims = ("time", "theta") if which == "circle" else ("time", "lat", "lon")
        assert nc["density"].dimensions == dims and ds["density"].dims == dims
        assert np.array_equal(nc["density"][:].data, ds["density"].values)
    _assert_grid_values(sol, ds)
    if which == "sphere":
        assert ds["lat"].min() > -90 and ds["lat"].max() < 90 and ds["lon"].min() >= 0 and ds["lon"].max() < 360
    back = mf.load(path)                        # the coefficients still round-trip exactly
    assert np.array_equal(back.data, sol.data) and np.array_equal(back.energy, sol.energy)


@pytest.mark.parametrize("dim", [2, 3])
def test_p1_mesh_follows_ugrid(dim, tmp_path):
    sol = _p1(dim)
    path = sol.save(tmp_path / "p1.nc", grid=True)
    ds, nc = _open_both(path)
    with nc:
        assert nc.getncattr("Conventions") == "CF-1.11 UGRID-1.0"
        mesh = nc["mesh"]
        assert mesh.getncattr("cf_role") == "mesh_topology" and mesh.getncattr("topology_dimension") == dim - 1
        conn_key = "face_node_connectivity" if dim == 3 else "edge_node_connectivity"
        conn = nc[mesh.getncattr(conn_key)]
        assert conn.getncattr("cf_role") == conn_key and conn.getncattr("start_index") == 0
        assert np.array_equal(conn[:], sol.representation.cells)
        nodes = mesh.getncattr("node_coordinates").split()
        assert nc["rho"].getncattr("mesh") == "mesh" and nc["rho"].getncattr("location") == "node"
        assert sorted(nc["rho"].getncattr("coordinates").split()) == sorted(nodes)
        for name in nodes:
            assert nc[name].dimensions == ("vertex",) and nc[name].getncattr("units")
        v = sol.representation.vertices
        if dim == 3:
            lon, lat = nc["mesh_node_lon"][:], nc["mesh_node_lat"][:]
            assert nc["mesh_node_lat"].getncattr("standard_name") == "latitude"
            la, lo = np.radians(lat), np.radians(lon)
            x = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], -1)
        else:
            th = nc["mesh_node_theta"][:]
            assert nc["mesh_node_theta"].getncattr("units") == "radian"
            x = np.stack([np.cos(th), np.sin(th)], -1)
        assert np.max(np.abs(x - v)) <= 1e-15
        for i in range(2):          # the data at the node coordinates are the density there
            assert np.max(np.abs(nc["rho"][i] - sol.density(x, i))) <= 1e-12
    assert np.array_equal(mf.load(path).data, sol.data)


def test_zonal_and_lagrangian_grids(tmp_path):
    d = 6
    geg = solvers.Gegenbauer(mf.Model(beta=1.0, dim=d), 12).solve(D.von_mises_fisher([0.0] * (d - 1) + [1.0], 1.0),
                                                                  [0.0, 0.2], progress=False)
    ds, nc = _open_both(geg.save(tmp_path / "g.nc", grid="points"))
    with nc:
        assert nc["density"].dimensions == ("time", "s") and nc["s"].getncattr("units") == "1"
    s = ds["s"].values
    np.testing.assert_allclose(ds["density"].values[1], geg.representation.profile(geg.data[1], s), rtol=0, atol=1e-12)
    lag = solvers.Lagrangian(mf.Model(beta=2.0, dim=2), nodes=64).solve(D.perturbed_uniform(0.2, 2), [0.0, 0.5],
                                                                       progress=False)
    ds, nc = _open_both(lag.save(tmp_path / "l.nc", grid="points"))
    with nc:
        _assert_attrs(ds, nc, S1_ATTRS + DENSITY_ATTRS)
    _assert_grid_values(lag, ds)
    assert np.array_equal(mf.load(tmp_path / "l.nc").data, lag.data)


def test_particles_have_no_point_values(tmp_path):
    """Particles have cell means (the histogram, tests/test_grids.py) but no density values."""
    x = mf.sampling.uniform_points(10, 3, 0)[None]
    sol = mf.Solution([0.0], mf.Model(beta=1.0, dim=3), ParticleCloud(np.full(10, 0.1), 3), x)
    with pytest.raises(ValueError, match="`grid`"):
        sol.save(tmp_path / "p.nc", grid="points")


def _fem_solution(dim):
    for module in ("mpi4py.MPI", "dolfinx"):          # mpi4py.MPI first: it loads the MPI library dolfinx links to
        pytest.importorskip(module, reason="the fem extra (dolfinx) is not installed")
    rho0 = D.perturbed_uniform(0.2, 2) if dim == 2 else D.von_mises_fisher([0, 0, 1.0], 1.0)
    return solvers.FiniteElements(mf.Model(beta=1.0, dim=dim), refinement=5 if dim == 2 else 3).solve(
        rho0, [0.0, 0.1], progress=False)


SOLUTIONS = {
    "FourierCircle": lambda request: request.getfixturevalue("circle"),
    "SphericalHarmonics": lambda request: request.getfixturevalue("sphere"),
    "Gegenbauer": lambda request: solvers.Gegenbauer(mf.Model(beta=1.0, dim=4), 16).solve(
        D.von_mises_fisher([0, 0, 0, 1.0], 1.0), [0.0, 0.2], progress=False),
    "Lagrangian S^1": lambda request: solvers.Lagrangian(mf.Model(beta=2.0, dim=2), nodes=64).solve(
        D.perturbed_uniform(0.2, 2), [0.0, 0.5], progress=False),
    "Lagrangian S^2": lambda request: solvers.Lagrangian(mf.Model(beta=2.0, dim=3), nodes=200).solve(
        D.von_mises_fisher([0, 0, 1.0], 1.0), [0.0, 0.5], progress=False),
    "Particles": lambda request: solvers.Particles(mf.Model(beta=2.0, dim=3)).solve(
        mf.sampling.uniform_points(20, 3, 0), [0.0, 0.5], progress=False),
    "P1 S^1": lambda request: _p1(2),
    "P1 S^2": lambda request: _p1(3),
    "FiniteElements S^1": lambda request: _fem_solution(2),
    "FiniteElements S^2": lambda request: _fem_solution(3),
}
# The compliance checker (6.1) applies the discrete-sampling list of cf_role values (CF 9.5) to every
# variable with a cf_role; CF 1.11 (section 5.9) also admits the UGRID roles of a mesh, which a P1
# grid needs (mesh_topology, edge/face_node_connectivity). Only these two messages are tolerated,
# and only on the UGRID files.
UGRID_ROLES = ("is not a valid cf_role value", "may only be one variable containing the cf_role")


@pytest.mark.parametrize("grid", [False, True], ids=["coefficients", "grid"])
@pytest.mark.parametrize("name", list(SOLUTIONS))
def test_no_failed_high_priority_cf_check(name, grid, request, tmp_path, cf_failures):
    """The IOOS compliance checker (CF 1.11) finds no failed high-priority check in the files of every
    solver, with the cell means of the density on a grid (particles: their histogram) or without (the UGRID roles of P1 meshes aside, see UGRID_ROLES)."""
    pytest.importorskip("compliance_checker.runner")
    sol = SOLUTIONS[name](request)
    path = sol.save(tmp_path / "s.nc", grid=grid)
    failed = cf_failures(path, 3)
    if grid and sol.representation.name == "p1":
        assert failed and all(any(k in m for k in UGRID_ROLES) for m in failed), failed
    else:
        assert failed == []
    ds, nc = _open_both(path)
    with nc:
        _assert_attrs(ds, nc, TIME_ATTRS)
        assert nc.getncattr("Conventions").startswith("CF-1.11") and nc.getncattr("title")
        assert not any(f"'{name}'" in m for m in cf_failures(path, 2) for name in ("theta", "s"))   # no longitude
    assert np.array_equal(time_values(ds), sol.t)
    assert np.array_equal(mf.load(path).t, sol.t)
    with xr.open_dataset(path) as plain:                          # plain xarray: float t, .sel by time works
        assert plain["time"].dtype == np.float64 and np.array_equal(plain["time"].values, sol.t)
        assert float(plain.sel(time=sol.t[-1], method="nearest")["time"]) == sol.t[-1]


# -- summary.json ---------------------------------------------------------------------------------------
def _config(**overrides):
    cfg = {"solver": {"name": "fourier", "modes": 32}, "model": {"beta": 3.0, "dim": 2},
           "initial": {"density": "perturbed_uniform", "amplitude": 0.2, "degree": 2},
           "times": {"t_end": 1.0, "n_saves": 11}, "output": {"name": "c", "plot": False}}
    for key, value in overrides.items():
        cfg[key].update(value)
    return cfg


def _read(out):
    return json.loads((out / "summary.json").read_text())


def _assert_checks_state_what_and_tolerance(summary):
    assert summary["checks"]
    for c in summary["checks"]:
        assert set(c) >= {"name", "passed", "compared", "tolerance", "detail"}
        assert c["compared"] and c["tolerance"], c


def test_run_summary_has_the_physics(tmp_path):
    report = run_experiment(_config(output={"grid": True}), tmp_path, progress=False)
    s = _read(tmp_path)
    assert s["status"] == "finished" and s["passed"]
    assert 0.3 in s["settings"]["config"]["t_eval"] and 0.30000000000000004 not in s["settings"]["config"]["t_eval"]
    fs = s["results"]["final_state"]
    sol = report.solution
    assert fs["t"] == 1.0
    grid = sol.state(-1).to_grid().values
    assert fs["density"]["max"] == pytest.approx(grid.max(), rel=1e-11) and fs["density"]["min"] < 1
    e = fs["energy"]
    assert e["uniform_minimum"] == pytest.approx(mf.energy.uniform_energy(3.0, 2), rel=1e-11)
    assert e["dirac_maximum"] == pytest.approx(np.exp(3.0) / 6, rel=1e-11)
    assert e["uniform_minimum"] < e["value"] < e["dirac_maximum"]
    assert 0 < fs["w1_to_uniform"]["value"] < fs["w1_to_dirac"]["value"] < np.pi
    assert fs["clusters"]["separated"] is False and fs["clusters"]["count"] is None    # ρ(1) is still smooth
    _assert_checks_state_what_and_tolerance(s)
    assert "density" in xr.open_dataset(tmp_path / "c.nc")       # [output] grid = true


def test_run_summary_names_its_two_density_minima(tmp_path):
    """The run-wide minimum at the solver's nodes and the final one on the grid of to_grid are two
    numbers with two names, each saying where it was taken."""
    sol = run_experiment(_config(times={"t_end": 2.0, "n_saves": 5}), tmp_path, progress=False).solution
    res = _read(tmp_path)["results"]
    assert "min_density" not in res
    run_min, final = res["min_density_over_run"], res["final_state"]["density"]
    d = sol.diagnostics["min_density"]                 # summary.json keeps 12 significant digits
    assert run_min["value"] == pytest.approx(d.min(), rel=1e-11) and d.min() == d[-1]   # ρ's minimum falls
    assert final["min"] == pytest.approx(sol.state(-1).to_grid().values.min(), rel=1e-11)
    assert final["min"] != run_min["value"] and final["min"] == pytest.approx(run_min["value"], abs=1e-3)
    assert "5 saved times" in run_min["where"] and "FourierCircle's own nodes" in run_min["where"]
    assert final["where"] == "at the last saved time t = 2, on the grid of to_grid"


def test_stopped_run_summary_and_picture(tmp_path):
    cfg = _config(solver={"modes": 32}, model={"beta": 8.0}, times={"t_end": 12.0, "n_saves": 13},
                  output={"plot": True})
    run_experiment(cfg, tmp_path, progress=False)
    s = _read(tmp_path)
    assert s["status"].startswith("stopped: ") and "under-resolved" in s["status"] and not s["passed"]
    assert s["results"]["t_end"] < s["results"]["t_requested"] == 12.0
    assert [c["passed"] for c in s["checks"] if c["name"] == "run finished"] == [False]
    assert (tmp_path / "c.png").stat().st_size > 5000


def test_config_accepts_auto_and_the_command_line_options(tmp_path):
    from meanfield.experiments.config import parse_config

    cfg = parse_config(_config(solver={"modes": "auto"}, output={"dir": str(tmp_path), "quick": True,
                                                                    "progress": False, "scale": "log"}))
    assert cfg.resolution == "auto" and cfg.out_dir == str(tmp_path) and cfg.quick_run and cfg.progress is False
    assert cfg.make_solver().auto
    for bad, key in [({"solver": {"modes": "fine"}}, "solver.modes"), ({"output": {"scale": "loud"}}, "output.scale"),
                     ({"output": {"quick": "yes"}}, "output.quick"), ({"output": {"dir": 3}}, "output.dir")]:
        with pytest.raises(ValueError, match=f"`{key}`"):
            parse_config(_config(**bad))
    particles = {"solver": {"name": "particles", "n": 10}, "model": {"beta": 1.0, "dim": 3},
                 "initial": {"density": "uniform"}, "times": {"t_end": 1.0}, "output": {"grid": True}}
    with pytest.raises(ValueError, match="`output.grid`"):
        parse_config(particles)


def test_clusters_only_where_separated():
    rng = np.random.default_rng(0)
    for d in (2, 3):
        x = mf.sampling.uniform_points(2000, d, 0)      # near uniform: no cluster count (not "1 cluster")
        c = clusters_summary((x, np.full(2000, 1 / 2000)))
        assert c["separated"] is False and c["count"] is None
    centres = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, -1.0]])
    x = np.repeat(centres, [500, 300, 200], axis=0) + 1e-4 * rng.standard_normal((1000, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    c = clusters_summary((x, np.full(1000, 1e-3)))
    assert c["separated"] and c["count"] == 3 and c["linking_distance"] == 1e-3
    np.testing.assert_allclose(c["masses"], [0.5, 0.3, 0.2], atol=1e-12)
    got = np.array([p["x"] for p in c["positions"]])
    assert np.max(np.abs(got - centres)) < 1e-4
    assert c["positions"][2]["lat"] == pytest.approx(-90, abs=0.01)


def test_final_state_of_particles_in_high_dimension():
    x = mf.sampling.uniform_points(50, 16, 1)
    sol = mf.Solution([0.0], mf.Model(beta=2.0, dim=16), ParticleCloud(np.full(50, 0.02), 16), x[None])
    fs = final_state(sol)
    assert fs["density"]["max"] is None and fs["w1_to_uniform"]["value"] is None
    assert fs["energy"]["value"] == pytest.approx(sol.energy[0], rel=1e-11)
    assert fs["clusters"]["count"] is None


def test_tidy_rounds_float_noise_only():
    assert tidy({"t": [0.1 * 3, 1e-17, 2.0 / 3], "n": 3}) == {"t": [0.3, 1e-17, 0.666666666667], "n": 3}


def test_handed_over_run_has_one_grid_and_marks_the_hand_over(tmp_path):
    sol = solvers.FourierCircle(mf.Model(beta=8.0, dim=2), modes=32).solve(
        D.perturbed_uniform(0.05, 3), np.linspace(0, 6, 7), progress=False, on_underresolved="lagrangian")
    assert len(sol.segments) == 2
    ds, nc = _open_both(sol.save(tmp_path / "h.nc", grid="points"))
    nc.close()
    _assert_grid_values(sol, ds)                    # spectral times and Lagrangian times on one θ grid
    fig = sol.plot()
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "hand-over to Lagrangian" in texts
    assert "K = 32 modes → " in fig._suptitle.get_text()


def test_particles_kept_at_some_times_only():
    x0 = mf.sampling.uniform_points(64, 3, 0)
    sol = solvers.Particles(mf.Model(beta=4.0, dim=3)).solve(x0, np.linspace(0, 2, 5), progress=False, save="ends")
    fs = final_state(sol)                             # from the last kept positions
    assert fs["t"] == 2.0 and fs["w1_to_dirac"]["value"] > 0
    fig = sol.plot()
    assert "positions kept at 2 of 5 saved times" in fig.axes[0].get_title()


def test_describe_dataset_makes_an_experiment_file_pass(tmp_path, cf_failures):
    """`gridded.describe_dataset` gives any results Dataset (here the shape of verify-prop34's
    coefficients.nc) what the CF checker asks at high priority: long names, no fill value on coordinates."""
    from meanfield.spaces.gridded import describe_dataset

    ds = xr.Dataset({"min_ratio": (("beta",), np.array([0.5, 0.25])), "l_eps": (("beta",), np.array([3, 5]))},
                    coords={"beta": [1.0, 2.0]})
    ds.to_netcdf(tmp_path / "raw.nc")
    assert cf_failures(tmp_path / "raw.nc", 3)                      # as written before: long names missing
    describe_dataset(ds, title="verify-prop34: kernel coefficients")
    ds.to_netcdf(tmp_path / "described.nc")
    assert cf_failures(tmp_path / "described.nc", 3) == []
    assert ds["min_ratio"].attrs["long_name"] == "min ratio" and ds.attrs["title"].startswith("verify-prop34")


def test_every_file_history_names_the_version(circle, tmp_path):
    """The global `history` of a Solution file and of any Dataset `describe_file` writes (experiments,
    sweep cells) names the version."""
    from meanfield.experiments.report import Report
    from meanfield.spaces.gridded import describe_file

    circle.save(tmp_path / "s.nc")
    Report("phase-diagram", out=tmp_path).save_dataset(
        xr.Dataset({"order": ("time", np.array([0.1, 0.2]))}, coords={"time": [0.0, 1.0]}), "e.nc")
    want = {"s.nc": "Solution.save", "e.nc": "meanfield phase-diagram"}
    for name, what in want.items():
        with xr.open_dataset(tmp_path / name) as ds:
            assert ds.attrs["history"] == f"written by meanfield {mf.__version__} ({what})"
    assert describe_file(xr.Dataset(), "t").attrs["history"] == f"written by meanfield {mf.__version__}"


def test_a_causal_hand_over_file_keeps_its_position_and_time_coordinates(tmp_path):
    """Each segment of a layered run handed over to the labels has its σ as a coordinate (CF
    `position`) and the model times t of its saved states (floats, units 1), in plain xarray."""
    model = mf.Model(beta=4.0, dim=2, mask="causal", position_bias=1.0)
    law = lambda x: 1 + 0.6 * x[..., 0] + 0.3 * np.sin(2 * np.arctan2(x[..., 1], x[..., 0]))
    t = [0.0, 0.5, 1.0, 1.5]
    sol = solvers.FourierCircle(model, 24, positions=8).solve(law, t, on_underresolved={"nodes": 32}, progress=False)
    assert [s.representation.name for s in sol.segments] == ["layered", "layered-lagrangian"]
    with xr.open_dataset(sol.save(tmp_path / "causal.nc")) as ds:
        times = np.concatenate([ds[f"segment{k}__time"].values for k in (0, 1)])
        np.testing.assert_array_equal(times, t)
        for k in (0, 1):
            assert f"segment{k}__position" in ds.coords
            np.testing.assert_array_equal(ds[f"segment{k}__position"].values, sol.segments[k].representation.positions)
            assert ds[f"segment{k}__time"].dtype.kind == "f" and ds[f"segment{k}__time"].attrs["units"] == "1"
            assert ds[f"segment{k}__position"].attrs["units"] == "1"
        assert ds["segment1__positions"].dims[:2] == ("segment1__time", "segment1__position")
    back = mf.load(tmp_path / "causal.nc")
    x = mf.sphere_quadrature(16, 2).points
    np.testing.assert_array_equal(back.density(x, -1, position=0.6), sol.density(x, -1, position=0.6))
