"""Solution: derived fields, NetCDF round trip, plots (the public `Solution` contract)."""
import numpy as np
import pytest
import xarray as xr

import meanfield as mf
from meanfield.representations.fourier import FourierSeries
from meanfield.representations.particles import ParticleCloud


def fourier_solution():
    rho = mf.densities.von_mises_fisher([1.0, 0.0], 2.0)
    theta = 2 * np.pi * np.arange(64) / 64
    vals = rho(np.stack([np.cos(theta), np.sin(theta)], -1))
    c = np.fft.fft(vals)[:17] / 64
    data = np.stack([c, 0.5 * c + 0.5 * np.eye(17)[0]])
    model = mf.Model(beta=3.0, dim=2, V=-1.0, noise=0.01)
    return mf.Solution([0.0, 1.5], model, FourierSeries(16), data, diagnostics={"tail": np.array([1e-9, 2e-9])},
                       stats={"nfev": 10}, solver="test"), rho


def test_fourier_solution_fields():
    sol, rho = fourier_solution()
    x = np.random.default_rng(0).standard_normal((7, 2))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    assert np.allclose(sol.density(x, 0), rho(x), atol=1e-12)          # κ = 2 is resolved by 16 modes
    assert np.allclose(sol.density(x, -1), 0.5 * rho(x) + 0.5, atol=1e-12)
    assert np.allclose(sol.mass, 1.0, atol=1e-15)
    pts, w = sol.measure(0, n=4096)
    assert abs(w.sum() - 1) < 1e-14 and np.all(w >= 0)
    assert sol.energy[0] == pytest.approx(mf.interaction_energy(3.0, (pts, w)), rel=1e-12)
    assert sol.energy[1] < sol.energy[0]
    with pytest.raises(AttributeError):
        sol.positions
    with pytest.raises(ValueError, match=r"`i` must be an integer index"):
        sol.density(x, 5)
    with pytest.raises(ValueError, match=r"`x` must lie on the unit sphere"):
        sol.density(2 * x, 0)


def test_netcdf_round_trip(tmp_path):
    sol, _ = fourier_solution()
    path = tmp_path / "s.nc"
    sol.save(path)
    back = mf.load(path)
    assert np.array_equal(back.t, sol.t) and np.array_equal(back.data, sol.data)
    assert np.array_equal(back.energy, sol.energy) and back.model == sol.model
    assert np.array_equal(back.diagnostics["tail"], sol.diagnostics["tail"])
    assert back.stats["nfev"] == 10 and back.solver == "test"
    ds = xr.open_dataset(path)
    assert ds.attrs["model_beta"] == 3.0 and ds.attrs["representation"] == "fourier"
    assert "energy" in ds and ds["energy"].dims == ("time",)
    ds.close()


def test_particle_solution_round_trip_and_plot(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 20, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    w = rng.dirichlet(np.ones(20))
    sol = mf.Solution([0.0, 1.0, 2.0], mf.Model(beta=1.0, dim=3), ParticleCloud(w, 3), x)
    assert sol.positions.shape == (3, 20, 3) and np.array_equal(sol.weights, w)
    assert np.allclose(sol.mass, 1.0)
    assert sol.energy[1] == pytest.approx(mf.interaction_energy(1.0, (x[1], w)), rel=1e-14)
    pts, ww = sol.measure(1)
    assert np.array_equal(pts, x[1])
    with pytest.raises(AttributeError):
        sol.density(x[0], 0)
    sol.save(tmp_path / "p.nc")
    back = mf.load(tmp_path / "p.nc")
    assert np.array_equal(back.positions, x) and np.array_equal(back.weights, w)
    fig = sol.plot(path=tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000
    import matplotlib.pyplot as plt
    plt.close(fig)
    fsol, _ = fourier_solution()
    fig = fsol.plot(path=tmp_path / "f.png")
    plt.close(fig)
    assert (tmp_path / "f.png").stat().st_size > 1000


def test_slicing():
    sol, _ = fourier_solution()
    s = sol[1]
    assert s.t.tolist() == [1.5] and s.energy[0] == sol.energy[1]
    assert len(sol[0:2]) == 2


def test_a_slice_of_a_handed_over_run_within_one_segment_is_a_plain_solution(tmp_path):
    """sol[:k] of a spectral run handed over to the characteristics: the spectral times alone are a
    FourierCircle Solution (saved and loaded as such); across the hand-over the segments stay."""
    import solvers

    sol = solvers.FourierCircle(mf.Model(beta=8.0, dim=2), modes=32).solve(
        mf.densities.perturbed_uniform(0.05, 3), np.linspace(0, 6, 7), progress=False, on_underresolved="lagrangian")
    assert sol.representation.name == "segments"
    first = sol[:3]
    assert first.solver == "FourierCircle" and first.representation.name == "fourier" and first.data.shape == (3, 33)
    back = mf.load(first.save(tmp_path / "first.nc"))
    assert np.array_equal(back.data, sol.segments[0].data[:3]) and np.array_equal(back.t, [0.0, 1.0, 2.0])
    last = sol[-1]
    assert last.solver == "Lagrangian" and last.representation.name == "lagrangian"
    x = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert np.array_equal(last.density(x, 0), sol.density(x, -1))
    both = sol[2:]
    assert both.representation.name == "segments" and mf.load(both.save(tmp_path / "both.nc")).t.size == 5
