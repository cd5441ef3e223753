"""Clusters followed through time (`meanfield.observables.diagnostics.cluster_trajectories`), in the files and in
the summary of `meanfield run`."""
import json
import pathlib

import numpy as np
import pytest
import xarray as xr

import meanfield as mf
import solvers
from meanfield.observables.diagnostics import cluster_trajectories
from meanfield.experiments.run import run as run_experiment


def _clusters_on_circle(angles, masses, spread=1e-5, per=50):
    """Weighted points: ``per`` points of total mass m_k within ``spread`` of each angle."""
    x, w = [], []
    for a, m in zip(angles, masses):
        th = a + spread * np.linspace(-1, 1, per)
        x.append(np.stack([np.cos(th), np.sin(th)], -1))
        w.append(np.full(per, m / per))
    return np.concatenate(x), np.concatenate(w)


def test_a_merge_is_found_with_its_time_and_masses():
    """Three clusters of masses 0.5, 0.3, 0.2; the last two approach and merge between t = 2 and t = 3."""
    t = np.arange(5.0)
    gaps = [0.8, 0.4, 0.1, 0.0, 0.0]
    measures = [_clusters_on_circle([0.0, 2.0, 2.0 + g], [0.5, 0.3, 0.2]) if g else
                _clusters_on_circle([0.0, 2.08], [0.5, 0.5]) for g in gaps]
    out = cluster_trajectories(t, measures)
    np.testing.assert_array_equal(out["count"], [3, 3, 3, 2, 2])
    assert len(out["merges"]) == 1
    m = out["merges"][0]
    assert m["t"] == 3.0 and m["t_before"] == 2.0
    np.testing.assert_allclose(sorted(m["masses"]), [0.2, 0.3], rtol=1e-12)
    np.testing.assert_allclose(m["mass"], sum(m["masses"]), rtol=1e-12)          # merged masses add up
    np.testing.assert_allclose(out["mass"][:, 0], 0.5, rtol=1e-12)               # the heaviest keeps track 0
    assert out["mass"].shape == (5, 3) and np.isnan(out["mass"][3:, m["tracks"][1 - m["tracks"].index(m["into"])]]).all()
    np.testing.assert_allclose(out["centre"][0, 0], [1.0, 0.0], atol=1e-9)
    assert np.all(out["width"][np.isfinite(out["width"])] < 1e-5)


def test_particles_keep_their_identity_through_a_merge():
    """64 particles at β = 3 on S^1: three clusters, two merge once; the merged mass is the sum of the
    merging masses up to stray particles (at most the 5% that `find_clusters` leaves outside)."""
    x0 = mf.sampling.uniform_points(64, 2, 1)
    sol = solvers.Particles(mf.Model(beta=3.0, dim=2)).solve(x0, np.linspace(0, 30, 61), progress=False)
    out = sol.cluster_trajectories()
    c = out["count"][np.isfinite(out["count"])]
    assert c.max() == 3 and c[-1] == 2
    assert len(out["merges"]) == 1
    m = out["merges"][0]
    assert 10.0 < m["t"] < 12.0                                    # measured t = 11
    assert abs(m["mass"] - sum(m["masses"])) <= 0.05
    np.testing.assert_allclose(np.nansum(out["mass"], axis=1)[np.isfinite(out["count"])], 1.0, atol=0.05)


def _fourier_modes(tmp_path, nodes, t_end, n_saves):
    import tomllib

    cfg = tomllib.loads(pathlib.Path("examples/fourier_modes.toml").read_text())
    cfg["solver"]["nodes"] = nodes
    cfg["times"] = {"t_end": t_end, "n_saves": n_saves}
    cfg["output"].update(plot=False, grid=True)
    return run_experiment(cfg, tmp_path / "out", progress=False)


def _assert_three_clusters(report, path):
    traj = report.results["cluster_trajectories"]
    assert traj["max_count"] == 3 and traj["count"][-1] == 3 and traj["merges"] == []
    summary = json.loads((path / "summary.json").read_text())
    assert summary["results"]["cluster_trajectories"]["max_count"] == 3
    with xr.open_dataset(path / "fourier_modes.nc", decode_times=False) as ds:
        assert ds["cluster_count"].values[-1] == 3
        assert ds["cluster_mass"].dims == ("time", "cluster") and ds["cluster_centre"].dims[:2] == ("time", "cluster")
        last = ds["cluster_mass"].values[-1]
        np.testing.assert_allclose(np.nansum(last), 1.0, atol=0.05)
        np.testing.assert_allclose(np.sort(last[np.isfinite(last)]), [0.27, 0.36, 0.37], atol=0.02)
        assert ds["density"].attrs["cell_methods"] == "time: point theta: mean"
        mass = (ds["density"] * ds["cell_weight"]).sum("theta").values
        assert np.max(np.abs(mass - 1.0)) <= 1e-6


def test_fourier_modes_example_writes_three_cluster_trajectories(tmp_path, monkeypatch):
    """examples/fourier_modes.toml (β = 5, k* = 3) at 256 labels: the count reaches 3."""
    monkeypatch.chdir(pathlib.Path(__file__).parents[1])
    report = _fourier_modes(tmp_path, 256, 12.0, 13)
    _assert_three_clusters(report, tmp_path / "out")


@pytest.mark.slow
def test_fourier_modes_example_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(pathlib.Path(__file__).parents[1])
    _assert_three_clusters(_fourier_modes(tmp_path, 1024, 12.0, 49), tmp_path / "out")


def test_cluster_variables_pass_the_cf_checker(tmp_path, cf_failures):
    x0 = mf.sampling.uniform_points(64, 2, 1)
    sol = solvers.Particles(mf.Model(beta=3.0, dim=2)).solve(x0, np.linspace(0, 15, 16), progress=False)
    path = sol.save(tmp_path / "p.nc", grid=True, clusters=True)
    assert cf_failures(path) == []
    back = mf.load(path)
    assert np.array_equal(back.data, sol.data)
    with xr.open_dataset(path, decode_times=False) as ds:
        assert json.loads(ds.attrs["cluster_merges_json"]) == json.loads(json.dumps(sol.cluster_trajectories()["merges"]))
