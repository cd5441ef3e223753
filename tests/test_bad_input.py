"""Each public function of the model layer rejects bad input with a ValueError naming the argument."""
import numpy as np
import pytest

import meanfield as mf

GOOD = (np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0.5, 0.5]))
OFF = (np.array([[1.0 + 1e-9, 0.0], [0.0, 1.0]]), np.array([0.5, 0.5]))
NAN_PTS = (np.array([[np.nan, 0.0], [0.0, 1.0]]), np.array([0.5, 0.5]))
NEG_W = (GOOD[0], np.array([1.5, -0.5]))
SUM_W = (GOOD[0], np.array([0.5, 0.6]))
INF_W = (GOOD[0], np.array([np.inf, 0.5]))
SHAPE_W = (GOOD[0], np.array([1.0]))

BAD_MEASURES = [(OFF, "unit sphere"), (NAN_PTS, "NaN"), (NEG_W, "non-negative"), (SUM_W, "sum to 1"),
                (INF_W, "NaN or inf"), (SHAPE_W, "shape")]


@pytest.mark.parametrize("fn", [
    lambda b: mf.kernel_multipliers(b, 3, 4), lambda b: mf.velocity_multipliers(b, 3, 4),
    lambda b: mf.interaction_energy(b, GOOD), lambda b: mf.uniform_energy(b, 3), lambda b: mf.dirac_energy(b),
    lambda b: mf.energy_from_spectrum(b, 3, [1.0, 0.1]), lambda b: mf.Model(beta=b, dim=3),
])
@pytest.mark.parametrize("beta", [np.nan, np.inf, -np.inf])     # β < 0 is accepted (tests/test_negative_beta.py)
def test_beta(fn, beta):
    with pytest.raises(ValueError, match="beta"):
        fn(beta)


@pytest.mark.parametrize("fn", [
    lambda d: mf.kernel_multipliers(1.0, d, 4), lambda d: mf.velocity_multipliers(1.0, d, 4),
    lambda d: mf.uniform_energy(1.0, d), lambda d: mf.energy_from_spectrum(1.0, d, [1.0]),
    lambda d: mf.Model(beta=1.0, dim=d), lambda d: mf.sample(mf.densities.uniform(), 5, d),
    lambda d: mf.sphere_quadrature(5, d),
])
@pytest.mark.parametrize("dim", [1, 0, -2, 2.5, np.nan])
def test_dim(fn, dim):
    with pytest.raises(ValueError, match="dim"):
        fn(dim)


@pytest.mark.parametrize("fn", [
    lambda m: mf.interaction_energy(1.0, m), lambda m: mf.wasserstein(m, GOOD), lambda m: mf.wasserstein(GOOD, m),
    lambda m: mf.w1_to_dirac(m), lambda m: mf.w1_to_uniform(m),
])
@pytest.mark.parametrize("measure,match", BAD_MEASURES)
def test_measures(fn, measure, match):
    with pytest.raises(ValueError, match=match):
        fn(measure)


def test_spectrum_and_solution_shapes():
    with pytest.raises(ValueError, match="power"):
        mf.energy_from_spectrum(1.0, 3, [1.0, np.nan])
    with pytest.raises(ValueError, match="power"):
        mf.energy_from_spectrum(1.0, 3, [1.0, -0.1])
    from meanfield.representations.fourier import FourierSeries
    with pytest.raises(ValueError, match="data"):
        mf.Solution([0.0, 1.0], mf.Model(beta=1.0, dim=2), FourierSeries(2), np.zeros((3, 3), complex))
    with pytest.raises(ValueError, match="model"):
        mf.Solution([0.0], "model", FourierSeries(2), np.zeros((1, 3), complex))


def test_linear_growth_rates_needs_zonal_model():
    with pytest.raises(mf.UnsupportedModel):
        mf.linear_growth_rates(mf.Model(beta=1.0, dim=3, V=np.diag([1.0, 2.0, 3.0])), 4)


def test_silently_accepted_inputs_are_refused():
    """Each refused with one line naming the argument."""
    import solvers
    with pytest.raises(ValueError, match="`schedule` piece 1: `beta` must be a real number, got '2'"):
        mf.Model(beta=1.0, dim=2, schedule=mf.Schedule([0.0, 1.0], [{}, {"beta": "2"}]))
    with pytest.raises(ValueError, match="`max_positions` must be an integer"):
        solvers.FourierCircle(mf.Model(beta=1.0, dim=2, mask="causal"), 16, positions=8, max_positions="many")
    with pytest.raises(ValueError, match="`activation`='relu' .* the model has none"):
        mf.Model(beta=1.0, dim=2, activation="relu")
    m = np.zeros(12)
    m[3] = np.nan
    with pytest.raises(ValueError, match=r"`initial` must be finite: the mean m\[3\] is nan"):
        solvers.Gaussian(mf.Model(1.0, 12)).solve((m, np.eye(12)), [0.0, 1.0])


def test_a_toml_cap_with_fixed_positions_is_refused(tmp_path):
    from meanfield.cli import main
    cfg = tmp_path / "c.toml"
    cfg.write_text('[solver]\nname = "fourier"\nmodes = 24\npositions = 8\nmax_positions = "many"\n'
                   '[model]\nbeta = 1.0\ndim = 2\nmask = "causal"\n[initial]\ndensity = "uniform"\n[times]\nt_end = 1.0\n')
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 2


def test_argument_checks_raise_invalid_input():
    """The CLI's exit status 2 is for `InvalidInput` only (any other error inside a run is exit 1), so the
    package raises no plain ValueError: a check written with one would report bad input as a failure."""
    import pathlib
    import re
    root = pathlib.Path(mf.__file__).resolve().parents[1]
    plain = [f"{p.relative_to(root)}:{n + 1}" for d in ("meanfield", "solvers") for p in (root / d).rglob("*.py")
             for n, line in enumerate(p.read_text().splitlines()) if re.search(r"\braise ValueError\(", line)]
    assert plain == []
    assert issubclass(mf.InvalidInput, ValueError) and issubclass(mf.UnsupportedModel, mf.InvalidInput)
