"""`solvers.Hardmax`: the hardmax limit (9.5)-(9.6) against closed forms, its events, the selection at
ties (Example 9.3, sliding), softmax approaching it, and its bad input (docs/attention.md, "Hardmax")."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

import meanfield as mf
import solvers
from meanfield.cli import main
from meanfield.experiments.hardmax_limit import softmax_counterpart, sup_distance
from solvers.hardmax import scores, select_weights

HARD = mf.Model(beta=1.0, dim=2, attention="hardmax")
A = 0.25
EXAMPLE_93 = np.array([[1.0, 0.0], [0.0, 1.0], [A, A]])


def hardmax(z0, t, model=HARD, **options):
    return solvers.Hardmax(model).solve(z0, t, progress=False, **options)


# -- Example 9.3 ------------------------------------------------------------------------------------------
def test_example_9_3_follows_the_symmetric_solution_exactly():
    """z_1, z_2 do not move; z_3 = m + (z_3(0) − m)e^{−t}, m = (z_1 + z_2)/2, to 1e-12: the limit β → ∞
    keeps the tie (softmax keeps the symmetry at every β); the two other Filippov solutions are listed."""
    t = np.linspace(0.0, 3.0, 31)
    sol = hardmax(EXAMPLE_93, t)
    z = sol.positions
    assert np.array_equal(z[:, :2], np.broadcast_to(EXAMPLE_93[:2], z[:, :2].shape))
    m = 0.5 * (EXAMPLE_93[0] + EXAMPLE_93[1])
    exact = m + (EXAMPLE_93[2] - m) * np.exp(-t)[:, None]
    assert np.max(np.abs(z[:, 2] - exact)) <= 1e-12
    (tie,) = sol.stats["ties"]
    assert tie["t"] == 0.0 and tie["sets"] == {2: [0, 1]} and tie["weights"] == {2: [0.5, 0.5]}
    assert tie["stable"] is False
    assert tie["options"] == [{2: [1.0, 0.0, 0.0]}, {2: [0.0, 1.0, 0.0]}]
    assert sol.stats["events"] == 0


def test_example_9_3_softmax_approaches_it():
    """Softmax (9.4) at β = 64, 128, 256 (`solvers.Particles` in R^d): the sup-distance on [0, 1] falls."""
    t = np.linspace(0.0, 1.0, 41)
    hard = hardmax(EXAMPLE_93, t)
    dist = [sup_distance(solvers.Particles(softmax_counterpart(HARD, b)).solve(
        EXAMPLE_93, t, domain="euclidean", rtol=1e-10, atol=1e-12, progress=False).positions, hard.positions)
        for b in (64.0, 128.0, 256.0)]
    assert dist[0] > dist[1] > dist[2] and dist[2] < 1e-5, dist


def test_the_selection_of_example_9_3():
    W, (tie,) = select_weights(EXAMPLE_93, np.full(3, 1 / 3), np.eye(2), np.eye(2))
    assert W.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0]]
    assert not tie["stable"]


# -- straight lines and events ----------------------------------------------------------------------------
CHAIN = np.array([[0.17, 0.11], [0.62, 0.12], [-0.42, -0.17], [0.64, 0.25], [0.92, -0.26]])


def test_straight_line_and_event_time():
    """Token 3 is strictly inside the cell of the fixed token 4: z_3 = v + (z_3(0) − v)e^{−t} to 1e-12.
    Token 0 follows it (a chain: z_0 = v + (c + bt)e^{−t}) until the score of token 4 reaches that of token
    3, ⟨z_4, b⟩ + e^{−t}(⟨c, b⟩ + t|b|²) = 0: the event time to 1e-10."""
    v, b, c = CHAIN[4], CHAIN[3] - CHAIN[4], CHAIN[0] - CHAIN[4]
    t_event = brentq(lambda s: v @ b + np.exp(-s) * (c @ b + s * b @ b), 0.0, 1.0, xtol=1e-15)
    t = np.linspace(0.0, 2.0, 21)
    sol = hardmax(CHAIN, t)
    assert np.max(np.abs(sol.positions[:, 3] - (v + b * np.exp(-t)[:, None]))) <= 1e-12
    assert np.array_equal(sol.positions[:, 4], np.broadcast_to(v, (t.size, 2)))
    first = sol.stats["event_log"][0]
    assert first[1:] == (0, [3], 4)
    assert abs(first[0] - t_event) <= 1e-10
    before = t <= t_event
    chain = v + (c + b * t[before, None]) * np.exp(-t[before])[:, None]
    assert np.max(np.abs(sol.positions[before, 0] - chain)) <= 1e-12
    at = hardmax(CHAIN, [0.0, first[0]]).positions[-1]
    s = scores(at, np.eye(2))
    assert abs(s[0, 3] - s[0, 4]) <= 1e-12


def test_event_then_sliding_mode():
    """V = −I: a token driven away from v = (1, 0) meets the boundary x = 2y of the cell of w = (0, 2) at
    t* = ln(10/9), where both fields push towards it: the Filippov combination (4/5, 1/5) keeps it there
    (stable), and it moves as c + (z(t*) − c)e^{t − t*}, c = (4v + w)/5, to 1e-12."""
    model = mf.Model(beta=1.0, dim=2, V=-1.0, attention="hardmax")
    z0 = np.array([[1.0, 0.0], [0.0, 2.0], [0.5, 0.2]])
    t_star = np.log(10 / 9)
    t = np.linspace(0.0, 0.6, 13)
    sol = hardmax(z0, t, model=model)
    (event,) = sol.stats["event_log"]
    assert event[1:] == (2, [0], 1) and abs(event[0] - t_star) <= 1e-10
    (tie,) = sol.stats["ties"]
    assert tie["stable"] and tie["sets"] == {2: [0, 1]}
    np.testing.assert_allclose(tie["weights"][2], [0.8, 0.2], rtol=0, atol=1e-12)
    z_star = np.array([1.0 - 0.5 / 0.9, 0.2 / 0.9])
    c = (4 * z0[0] + z0[1]) / 5
    x = t[:, None]
    exact = np.where(x <= t_star, z0[0] + (z0[2] - z0[0]) * np.exp(x), c + (z_star - c) * np.exp(x - t_star))
    assert np.max(np.abs(sol.positions[:, 2] - exact)) <= 1e-12


def test_a_sliding_mode_with_a_moving_target_is_the_limit_of_softmax():
    """V = −I: token 2 slides on the boundary between v = z_0 (fixed) and w = z_1, which moves away from
    z_3; constant weights do not keep that tie, so the piece follows the Filippov field with the weights
    re-solved at every state (DOP853, counted in ``inexact_pieces``). The tie holds to 1e-12, and softmax
    approaches the solution at the rate 1/β of a sliding mode."""
    model = mf.Model(beta=1.0, dim=2, V=-1.0, attention="hardmax")
    z0 = np.array([[1.0, 0.0], [0.0, 2.0], [0.5, 0.2], [-1.0, 2.5]])
    t = np.linspace(0.0, 0.5, 26)
    hard = hardmax(z0, t, model=model)
    assert hard.stats["events"] == 1 and hard.stats["inexact_pieces"] == 1
    z = hard.positions[t > hard.stats["event_log"][0][0]]
    spread = np.einsum("td,td->t", z[:, 2], z[:, 0] - z[:, 1])
    assert np.max(np.abs(spread)) <= 1e-12
    dist = [sup_distance(solvers.Particles(softmax_counterpart(model, b)).solve(
        z0, t, domain="euclidean", rtol=1e-10, atol=1e-12, progress=False).positions, hard.positions)
        for b in (64.0, 128.0, 256.0)]
    assert all(1.8 < dist[k] / dist[k + 1] < 2.2 for k in (0, 1)), dist


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2 ** 16))
def test_tokens_with_fixed_targets_move_on_straight_lines(seed):
    """V = I, QᵀK positive definite, random tokens: until the first event, a token whose argmax is a single
    fixed token v moves on v + (z_0 − v)e^{−t} to 1e-12, and every event is a tie of scores to 1e-12."""
    rng = np.random.default_rng(seed)
    G = rng.uniform(-1, 1, (2, 2))
    M = G @ G.T + 0.3 * np.eye(2)
    model = mf.Model(beta=1.0, dim=2, K=M, attention="hardmax")
    z0 = rng.uniform(-1, 1, (6, 2))
    t = np.linspace(0.0, 2.0, 11)
    sol = hardmax(z0, t, model=model)
    events = sol.stats["event_log"]
    t_first = events[0][0] if events else np.inf
    S = scores(z0, M)
    target = S.argmax(axis=1)
    fixed = [i for i in range(6) if target[i] == i and np.sort(S[i])[-2] < S[i, i] - 1e-9]
    for i in range(6):
        if target[i] in fixed and i not in fixed and np.sort(S[i])[-2] < S[i].max() - 1e-9:
            v = z0[target[i]]
            early = t <= t_first
            line = v + (z0[i] - v) * np.exp(-t[early])[:, None]
            assert np.max(np.abs(sol.positions[early, i] - line)) <= 1e-12
    for t_e, i, old, new in events[:3]:
        at = hardmax(z0, [0.0, t_e], model=model).positions[-1]
        s = scores(at, M)
        assert abs(s[i, new] - s[i, old].max()) <= 1e-12 * (1 + np.abs(s).max())


# -- the sphere -----------------------------------------------------------------------------------------
def test_sphere_great_circle():
    """On S^2 with QᵀK = diag(1, 0.3, 0.3): a token whose argmax is a fixed token v moves on the great circle
    towards v with tan(φ/2) = tan(φ_0/2)e^{−t} (|V v| = 1), to 1e-12; norms stay 1 to rounding."""
    model = mf.Model(beta=1.0, dim=3, K=np.diag([1.0, 0.3, 0.3]), attention="hardmax")
    v = np.array([1.0, 0.0, 0.0])
    z = np.array([0.6, 0.64, 0.48])
    t = np.linspace(0.0, 3.0, 13)
    sol = hardmax(np.array([v, z]), t, model=model, domain="sphere")
    phi = 2 * np.arctan(np.tan(0.5 * np.arccos(0.6)) * np.exp(-t))
    e = np.array([0.0, 0.8, 0.6])
    exact = np.cos(phi)[:, None] * v + np.sin(phi)[:, None] * e
    assert np.max(np.abs(sol.positions[:, 1] - exact)) <= 1e-12
    assert np.array_equal(sol.positions[:, 0], np.broadcast_to(v, (t.size, 3)))
    assert np.max(np.abs(np.linalg.norm(sol.positions, axis=-1) - 1)) <= 4e-16
    assert sol.stats["inexact_pieces"] == 0


def test_sphere_chain_is_integrated_and_counted():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    G = rng.standard_normal((3, 3))
    model = mf.Model(beta=1.0, dim=3, K=G @ G.T + np.eye(3), attention="hardmax")
    sol = hardmax(x, np.linspace(0.0, 1.0, 5), model=model, domain="sphere")
    assert np.max(np.abs(np.linalg.norm(sol.positions, axis=-1) - 1)) <= 1e-13
    assert sol.stats["inexact_pieces"] >= 1


@pytest.mark.slow
def test_softmax_on_the_sphere_approaches_hardmax_through_an_event():
    """The sphere's hardmax is the limit of the (SA) particles: 8 tokens on S^2 with QᵀK = GGᵀ + I, one event
    and a numerically integrated piece (a chain) on [0, 1]; softmax at β = 64, 128, 256 comes closer."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    G = rng.standard_normal((3, 3))
    K = G @ G.T + np.eye(3)
    t = np.linspace(0.0, 1.0, 21)
    hard = hardmax(x, t, model=mf.Model(beta=1.0, dim=3, K=K, attention="hardmax"), domain="sphere")
    assert hard.stats["events"] == 1 and hard.stats["inexact_pieces"] >= 1
    dist = [sup_distance(solvers.Particles(mf.Model(beta=b, dim=3, K=K)).solve(
        x, t, rtol=1e-10, atol=1e-12, progress=False).positions, hard.positions) for b in (64.0, 128.0, 256.0)]
    assert dist[0] > dist[1] > dist[2] and dist[2] < 1e-2, dist


# -- the Solution -----------------------------------------------------------------------------------------
def test_continuation_and_file_round_trip(tmp_path):
    t = np.linspace(0.0, 1.0, 9)
    whole = hardmax(CHAIN, t)
    first = hardmax(CHAIN, t[:5])
    first.save(tmp_path / "h.nc")
    back = mf.load(tmp_path / "h.nc")
    assert np.array_equal(back.positions, first.positions) and back.solver == "Hardmax"
    rest = hardmax(tmp_path / "h.nc", t[4:])
    np.testing.assert_allclose(rest.positions[-1], whole.positions[-1], rtol=0, atol=1e-13)


# -- bad input --------------------------------------------------------------------------------------------
def test_a_continuum_solver_refuses_a_hardmax_model():
    with pytest.raises(mf.UnsupportedModel, match="`attention`"):
        solvers.FourierCircle(HARD, modes=32)
    with pytest.raises(ValueError, match="`attention`"):
        solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3, attention="hardmax"), lmax=8)
    with pytest.raises(mf.UnsupportedModel, match="`attention`"):
        solvers.Hardmax(mf.Model(beta=1.0, dim=2))


def test_bad_input_names_the_argument():
    solver = solvers.Hardmax(HARD)
    with pytest.raises(ValueError, match="`z0`"):
        solver.solve(np.array([[1.0, 0.0], [0.0, 2.0]]), [0.0, 1.0], domain="sphere")
    with pytest.raises(ValueError, match="`t_eval`"):
        solver.solve(EXAMPLE_93, [0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="`domain`"):
        solver.solve(EXAMPLE_93, [0.0, 1.0], domain="torus")
    with pytest.raises(ValueError, match="`z0`"):
        solver.solve(np.zeros((3, 3)), [0.0, 1.0])


def test_cli_bad_option_exits_2_with_one_line(capsys):
    assert main(["hardmax-limit", "--n", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "`n`" in err[0]


@pytest.mark.slow
def test_the_quick_experiment_passes():
    from meanfield.experiments import hardmax_limit

    report = hardmax_limit(quick=True, progress=False, frames=1)
    assert report.passed, report.checks
    assert 0.75 <= report.results["exit_slope_over_gap"] <= 1.25
