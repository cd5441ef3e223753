"""Each fact computed in one place (issue 46, item 4): the shared helper gives what the copies gave."""
import json

import numpy as np
import pytest

import meanfield as mf
from tolerances import assert_rounding_close


def test_a_schedule_is_described_by_serialization_jsonable():
    """Arrays and tuples become nested lists, numpy scalars Python numbers (which json.dumps refused for
    np.float32 and np.int64), and `Schedule.from_dict` reads the description back to an equal schedule."""
    W, U, b = np.ones((2, 3)), np.full((3, 2), 0.5), np.zeros(3)
    schedule = mf.Schedule(np.array([0.0, 1.0, 2.5]), [
        {"beta": 1.0},
        {"beta": np.float64(2.0), "V": np.diag([1.0, 2.0]), "mlp": (W, U, b)},
        {"beta": np.float32(0.5), "heads": [(np.eye(2), np.eye(2), (1, np.int64(2)))]}])
    d = schedule.to_dict()
    assert d == {"times": [0.0, 1.0, 2.5], "pieces": [
        {"beta": 1.0},
        {"beta": 2.0, "V": [[1.0, 0.0], [0.0, 2.0]], "mlp": [W.tolist(), U.tolist(), b.tolist()]},
        {"beta": 0.5, "heads": [[[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]], [1, 2]]]}]}
    assert all(type(v) in (float, int, list) for p in d["pieces"] for v in p.values())
    assert type(d["pieces"][2]["beta"]) is float and type(d["pieces"][2]["heads"][0][2][1]) is int
    text = json.dumps(d)
    back = mf.Schedule.from_dict(json.loads(text))
    assert back == schedule and json.dumps(back.to_dict()) == text
    model = mf.Model(beta=1.0, dim=2, schedule={"times": [0.0, 1.0], "pieces": [{"beta": 1.0}, {"beta": np.int64(3)}]})
    assert json.dumps(model.to_dict())         # a model with a scheduled numpy integer is JSON-able


@pytest.mark.parametrize("sums", ["direct", "spectral"])
def test_the_particles_add_the_feed_forward_term_once(sums):
    """Σ_h (attention) + F(x): the output with an MLP minus that without is F(x), through either sums."""
    import solvers

    rng = np.random.default_rng(5)
    W, U, b = 0.3 * rng.standard_normal((3, 4)), rng.standard_normal((4, 3)), rng.standard_normal(4)
    x, w = mf.sample(mf.densities.von_mises_fisher([0.0, 0.0, 1.0], 1.0), 40, 3, rng=1)
    out = {}
    for mlp in (None, (W, U, b)):
        solver = solvers.Particles(mf.Model(beta=2.0, dim=3, mlp=mlp), sums=sums, diagnostics="none")
        out[mlp is None] = solver._evaluate(solver.start((x, w), [0.0, 1.0]), x, w)["out"]
    F = solver.model.feedforward.value(x)
    assert_rounding_close(out[False] - out[True], F, scale=max(np.max(np.abs(out[True])), np.max(np.abs(F))), terms=2)


def test_a_piece_model_knows_only_the_model_it_comes_from():
    """A piece's model points to its scheduled model (``source``); which piece it is, is where the schedule
    keeps it (``schedule.index``), not a second record on the piece."""
    model = mf.Model(beta=1.0, dim=2, schedule={"times": [0.0, 1.0, 2.0], "pieces": [{}, {"beta": 2.0}, {"beta": 3.0}]})
    for k in range(3):
        piece = model.piece(k)
        assert piece.source is model and piece.schedule is None and piece.source.piece(k) is piece
        assert model.schedule.index(float(k)) == k and piece.beta == [1.0, 2.0, 3.0][k]
        assert not hasattr(piece, "piece_index")
    assert mf.Model(beta=1.0, dim=2).source.schedule is None


def test_the_activations_a_model_accepts_are_those_the_feed_forward_term_defines():
    import inspect

    from meanfield.transformer import feedforward, model

    assert model.ACTIVATIONS == tuple(feedforward.ACTIVATIONS) == ("gelu", "tanh", "relu")
    assert inspect.signature(mf.Model).parameters["activation"].default == model.ACTIVATIONS[0]
    with pytest.raises(mf.InvalidInput, match="`activation` must be one of 'gelu', 'tanh', 'relu', got 'swish'"):
        mf.Model(beta=1.0, dim=2, activation="swish")


def _grid_of(name):
    import solvers

    dim = 2 if name in ("fourier", "lagrangian2") else 3
    rho0 = mf.densities.von_mises_fisher([0.6, 0.8] if dim == 2 else [0.0, 0.6, 0.8], 2.0)
    solver = {"fourier": lambda m: solvers.FourierCircle(m, modes=16),
              "harmonics": lambda m: solvers.SphericalHarmonics(m, lmax=16),
              "lagrangian2": lambda m: solvers.Lagrangian(m, nodes=64),
              "lagrangian3": lambda m: solvers.Lagrangian(m, nodes=72)}[name](mf.Model(beta=1.0, dim=dim))
    sol = solver.solve(rho0, [0.0, 0.1], progress=False)
    return sol, sol.state().to_grid(None, kind="points")


@pytest.mark.parametrize("name", ["fourier", "harmonics", "lagrangian2", "lagrangian3"])
def test_point_values_on_a_grid_are_one_dataarray_layout(name):
    """Every representation's ``to_grid`` is `gridded.point_dataarray`: ρ named "rho", the CF attributes
    of θ (S^1) or lat/lon (S^2), and the values of the solution's density at the grid's points."""
    from meanfield.spaces.gridded import LAT_ATTRS, LON_ATTRS, THETA_ATTRS, grid_points

    sol, da = _grid_of(name)
    coords = {"theta": THETA_ATTRS} if da.ndim == 1 else {"lat": LAT_ATTRS, "lon": LON_ATTRS}
    assert da.name == "rho" and da.dims == tuple(coords) and float(da.time) == 0.1
    assert da.attrs == {"long_name": "density relative to the uniform probability measure", "units": "1"}
    assert all(da[c].attrs == attrs for c, attrs in coords.items())
    x = grid_points(da.to_dataset())
    values = sol.density(x.reshape(-1, x.shape[-1])).reshape(da.shape)
    # two evaluations of the same sum: at most (lmax + 1)² = 289 terms (S^2 series), fewer elsewhere
    assert_rounding_close(da.values, values, terms=289)


# the names of the files written so far and the classes that read them (the table the registry replaced)
SAVED_NAMES = {
    "fourier": "fourier:FourierSeries", "harmonics": "harmonics:SphericalHarmonicSeries", "p1": "p1:P1Field",
    "particles": "particles:ParticleCloud", "sampled-particles": "sampled_particles:SampledParticleCloud",
    "lagrangian": "lagrangian:LagrangianNodes", "gegenbauer": "gegenbauer:GegenbauerSeries",
    "segments": "segments:Segments", "gaussian": "gaussian:GaussianMoments", "layered": "layered:LayeredDensity",
    "layered-lagrangian": "layered:LayeredNodes",
}


@pytest.mark.parametrize("name", sorted(SAVED_NAMES))
def test_each_representation_registers_itself_under_the_name_its_files_carry(name):
    import importlib

    from meanfield.representations.base import lookup_representation

    module, cls = SAVED_NAMES[name].split(":")
    assert lookup_representation(name) is getattr(importlib.import_module(f"meanfield.representations.{module}"), cls)
    assert lookup_representation(name).name == name


def test_a_new_representation_is_registered_by_its_definition_alone():
    from meanfield.representations import from_dataset
    from meanfield.representations.base import lookup_representation
    from meanfield.representations.fourier import FourierSeries

    class Toy(FourierSeries):
        name = "toy-fourier-46"

    class Impostor(FourierSeries):      # a later class of a known name does not take it over
        name = "fourier"

    c = np.zeros((2, 5), dtype=complex)
    c[:, 0] = 1.0
    import xarray as xr

    rep, data = from_dataset(xr.Dataset(*Toy(4).to_dataset(c)))
    assert type(rep) is Toy and rep.modes == 4 and np.array_equal(data, c)
    assert lookup_representation("fourier") is FourierSeries
    with pytest.raises(mf.InvalidInput, match="unknown representation 'nothing'"):
        lookup_representation("nothing")


@pytest.mark.parametrize("name, noted", [
    ("FourierCircle", True), ("SphericalHarmonics", True), ("Gegenbauer", True), ("Particles", True),
    ("Lagrangian", True), ("Gaussian", True), ("LayeredFourierCircle", True), ("LayeredLagrangian", True),
    ("SphericalHarmonics+Lagrangian", False), ("FiniteElements", False), ("NotASolver", False)])
def test_a_report_notes_the_mass_of_the_solvers_that_hold_it_by_construction(name, noted):
    """The solver class declares ``mass_by_construction``; a run's report reads it. A hand-over run is
    checked (its labels' weights are a quadrature of the density handed over: tests/test_cli.py)."""
    import types

    import solvers  # noqa: F401  (the solver classes)
    from meanfield.experiments.run import _mass_by_construction
    from solvers.fourier import LayeredFourierCircle
    from solvers.layered_lagrangian import LayeredLagrangian

    assert LayeredFourierCircle.mass_by_construction and LayeredLagrangian.mass_by_construction
    assert _mass_by_construction(types.SimpleNamespace(solver=name)) is noted


def test_the_hand_over_takes_the_keywords_of_the_lagrangian_solver_itself():
    """``on_underresolved`` as a dict: every keyword of `solvers.Lagrangian` but the run's own ``positions``
    and ``threads``, read from its signature (the seven of before among them), each built into the solver."""
    import inspect

    import solvers
    from solvers.handover import LAGRANGIAN_OPTIONS, handover_target

    keywords = set(inspect.signature(solvers.Lagrangian).parameters) - {"model", "positions", "threads"}
    assert set(LAGRANGIAN_OPTIONS) == keywords
    assert {"nodes", "panels", "order", "estimate", "cluster_tol", "min_mass", "chunk"} < keywords
    model = mf.Model(beta=1.0, dim=2)
    built = handover_target(model, {"nodes": 64, "cluster_tol": 2e-3, "sums": "direct"})
    assert isinstance(built, solvers.Lagrangian) and built.cluster_tol == 2e-3 and built.sums == "direct"
    with pytest.raises(mf.InvalidInput, match="'threads' is not one"):
        handover_target(model, {"threads": 2})


@pytest.mark.parametrize("name", ["FourierCircle", "SphericalHarmonics"])
def test_a_breakpoint_of_a_schedule_builds_no_basis(name, monkeypatch):
    """The bases depend on the resolution only: the pieces of a schedule take the model's multipliers and
    keep the bases (one dealiasing basis, and on S^2 at most one finer basis, for the whole run)."""
    import solvers
    from solvers import fourier, harmonics

    module, basis = (fourier, "FourierBasis") if name == "FourierCircle" else (harmonics, "SphericalHarmonicBasis")
    built = []

    class Counted(getattr(module, basis)):
        def __init__(self, *args, **kwargs):
            built.append(args)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(module, basis, Counted)
    dim = 2 if name == "FourierCircle" else 3
    schedule = {"times": [0.0, 0.2, 0.4], "pieces": [{"beta": 1.0}, {"beta": 2.0}, {"beta": 3.0}]}
    model = mf.Model(beta=1.0, dim=dim, schedule=schedule)
    solver = solvers.FourierCircle(model, modes=32) if dim == 2 else solvers.SphericalHarmonics(model, lmax=24)
    rho0 = mf.densities.perturbed_uniform(0.1, 2, dim=dim)
    sol = solver.solve(rho0, [0.0, 0.1, 0.3, 0.5], on_underresolved="raise")
    assert sol.status == 0 and sol.t[-1] == 0.5
    assert len(built) == (1 if dim == 2 else 2), built       # S^2: the dealiasing basis and the finer one


def test_the_sphere_basis_frame_is_computed_once_on_its_own_longitudes():
    """e_θ, e_φ at the Gauss–Legendre grid, from the basis's own φ (that of the grid's points): one
    read-only array however often it is read."""
    from meanfield.spaces.harmonics import SphericalHarmonicBasis

    basis = SphericalHarmonicBasis(12)
    frame = basis.frame
    assert frame is basis.frame and not frame.flags.writeable and frame.shape == (2, basis.ntheta, basis.nphi, 3)
    assert_rounding_close(np.einsum("a...d,...d->a...", frame, basis.points), np.zeros(frame.shape[:-1]), terms=3)
    assert_rounding_close(np.linalg.norm(frame, axis=-1), np.ones(frame.shape[:-1]), terms=3)
    np.testing.assert_array_equal(basis.phi, 2 * np.pi * np.arange(basis.nphi) / basis.nphi)
