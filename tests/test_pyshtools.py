"""pyshtools interoperability: a spherical-harmonic state as pyshtools.SHCoeffs and back ('4pi', csphase=1)."""
import numpy as np
import pytest

import meanfield as mf
import solvers
from meanfield.measures import densities as D

pysh = pytest.importorskip("pyshtools")


@pytest.fixture(scope="module")
def sol():
    rho0 = D.mixture([D.von_mises_fisher([0, 0, 1.0], 2.0), D.von_mises_fisher([1.0, 0, 0], 1.0)], [0.7, 0.3])
    return solvers.SphericalHarmonics(mf.Model(beta=2.0, dim=3), lmax=20).solve(rho0, [0.0, 0.5], progress=False)


def test_to_pyshtools_carries_lmax_and_the_4pi_normalisation(sol):
    state = sol.state(-1)
    coeffs = state.to_pyshtools()
    assert isinstance(coeffs, pysh.SHCoeffs) and coeffs.kind == "real"
    assert (coeffs.lmax, coeffs.normalization, coeffs.csphase) == (20, "4pi", 1)
    assert np.array_equal(coeffs.coeffs, sol.data[-1])                 # the numbers unchanged
    assert pysh.backends.preferred_backend() == "ducc"
    np.testing.assert_allclose(coeffs.spectrum(), state.spectrum(), rtol=1e-14, atol=0)   # ‖ρ_l‖² in L²(σ)
    # pyshtools' own synthesis agrees with the state's density (lat, lon in degrees)
    lat, lon = np.array([90.0, 10.0, -35.0]), np.array([0.0, 200.0, 77.0])
    la, lo = np.radians(lat), np.radians(lon)
    x = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], -1)
    np.testing.assert_allclose(coeffs.expand(lat=lat, lon=lon), state.density(x), rtol=0, atol=1e-12)


def test_round_trip_and_a_continued_run(sol):
    state = sol.state(-1)
    back = mf.from_pyshtools(state.to_pyshtools())
    assert np.max(np.abs(back - state.data)) <= 1e-12
    rho = mf.from_pyshtools(state.to_pyshtools(), kind="density")
    x = mf.sampling.uniform_points(64, 3, 0)
    np.testing.assert_allclose(rho(x), state.density(x), rtol=0, atol=1e-12)
    model = sol.model                                              # the coefficients start a run exactly
    again = solvers.SphericalHarmonics(model, lmax=20).solve(back, [0.0, 0.1], progress=False)
    assert np.array_equal(again.data[0], sol.data[-1])


@pytest.mark.parametrize("normalization", ["ortho", "schmidt", "unnorm"])
@pytest.mark.parametrize("csphase", [1, -1])
def test_other_normalisations_are_converted(sol, normalization, csphase):
    coeffs = sol.state(-1).to_pyshtools().convert(normalization=normalization, csphase=csphase)
    assert np.max(np.abs(mf.from_pyshtools(coeffs) - sol.data[-1])) <= 1e-12


def test_complex_coefficients_of_a_real_density(sol):
    coeffs = sol.state(-1).to_pyshtools().convert(kind="complex")
    assert np.max(np.abs(mf.from_pyshtools(coeffs) - sol.data[-1])) <= 1e-12
    not_real = pysh.SHCoeffs.from_array(1j * coeffs.coeffs, normalization="4pi", csphase=1)
    with pytest.raises(ValueError, match="`coeffs`"):
        mf.from_pyshtools(not_real)


def test_bad_input(sol):
    with pytest.raises(ValueError, match="`coeffs` must be a pyshtools.SHCoeffs"):
        mf.from_pyshtools(sol.data[-1])                   # a bare array carries no normalisation
    with pytest.raises(ValueError, match="`kind`"):
        mf.from_pyshtools(sol.state(-1).to_pyshtools(), kind="grid")
    with pytest.raises(AttributeError, match="no pyshtools coefficients"):
        solvers.FourierCircle(mf.Model(beta=1.0, dim=2), modes=16).solve(
            D.perturbed_uniform(0.1, 1), [0.0], progress=False).state(-1).to_pyshtools()
