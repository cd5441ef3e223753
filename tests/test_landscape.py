"""The energy landscape of n tokens (meanfield.landscape, Problem 3): derivatives against finite
differences, the closed forms of the regular polygon, the census against the list derived by hand for
n = 3, certification, completeness by branch-and-bound, thresholds and the dynamics."""
import numpy as np
import pytest
from scipy.optimize import brentq, minimize_scalar

import meanfield as mf
from meanfield import landscape as L
from meanfield.cli import main
from meanfield.landscape.branchbound import enclose
from meanfield.landscape.certify import certify_point, krawczyk
from meanfield.landscape.dynamics import ascent, departure, stays_near
from meanfield.landscape.energy import Energy, tangent_basis


def _random(n, d, rng):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _geodesic(x, B, v):
    u = np.einsum("ida,ia->id", B, v.reshape(x.shape[0], -1))
    r = np.linalg.norm(u, axis=1, keepdims=True)
    return np.cos(r) * x + np.sinc(r / np.pi) * u


@pytest.mark.parametrize("d", [2, 3, 4])
def test_gradient_and_hessian_are_the_derivatives_along_geodesics(d):
    rng = np.random.default_rng(d)
    n = 5
    x = _random(n, d, rng)
    A = rng.uniform(0, 1, (n, n))
    E = Energy(-1.3, n, d, weights=rng.uniform(0.5, 1.0, n), adjacency=A + A.T)
    B = tangent_basis(x)
    assert np.allclose(np.einsum("ida,idb->iab", B, B), np.eye(d - 1), atol=1e-15)
    assert np.max(np.abs(np.einsum("ida,id->ia", B, x))) < 1e-15
    g, H = E.gradient(x).ravel(), E.hessian(x)
    h = 1e-5
    for _ in range(3):
        v = rng.standard_normal(g.size)
        first = (E.value(_geodesic(x, B, h * v)) - E.value(_geodesic(x, B, -h * v))) / (2 * h)
        second = (E.value(_geodesic(x, B, h * v)) - 2 * E.value(x) + E.value(_geodesic(x, B, -h * v))) / h ** 2
        assert first == pytest.approx(g @ v, rel=1e-8)
        assert second == pytest.approx(v @ H @ v, rel=1e-4)


def test_beta_zero_is_the_limit_of_the_shifted_energy():
    rng = np.random.default_rng(1)
    x = _random(4, 3, rng)
    E = Energy(0.0, 4, 3)
    shifted = Energy(1e-7, 4, 3).value(x) - np.sum(E.C) / 2e-7
    assert E.value(x) == pytest.approx(0.5 * np.sum(E.C * (x @ x.T)))
    assert shifted == pytest.approx(E.value(x), abs=1e-6)


# -- the regular polygon ---------------------------------------------------------------------------------
def test_the_polygon_eigenvalues_are_those_of_the_hessian():
    for n in (3, 4, 7):
        for beta in (-3.0, 0.5):
            theta = 2 * np.pi * np.arange(n) / n
            H = Energy(beta, n).hessian(np.stack([np.cos(theta), np.sin(theta)], 1))
            assert np.allclose(np.sort(np.linalg.eigvalsh(H)), np.sort(L.polygon_eigenvalues(n, beta)),
                               atol=1e-14 * np.exp(abs(beta)))


def test_closed_forms_of_the_thresholds():
    assert L.polygon_threshold(3) == pytest.approx(-2 / 3, abs=1e-12)
    known = {5: -2.109924231799, 7: -4.430908305244, 9: -8.024076836617, 11: -11.886926082679}
    for n, b in known.items():
        assert L.polygon_threshold(n) == pytest.approx(b, abs=1e-11)
        assert L.polygon_top_eigenvalue(n, b - 1e-6) < 0 < L.polygon_top_eigenvalue(n, b + 1e-6)
    assert all(L.polygon_threshold(n) is None for n in range(2, 31, 2))
    # n = 2: λ_1 = 2e^{−β}/4 > 0; n = 4: λ_1 = (2β + 2e^{−β})/16, λ_2 = 4β/16: one of them > 0 for every β
    for beta in np.linspace(-10, 10, 41):
        assert L.polygon_eigenvalues(2, beta)[1] == pytest.approx(2 * np.exp(-beta) / 4)
        lam = L.polygon_eigenvalues(4, beta)
        assert lam[1] == pytest.approx((2 * beta + 2 * np.exp(-beta)) / 16, abs=1e-14)
        assert lam[2] == pytest.approx(4 * beta / 16, abs=1e-14)
        assert max(lam[1:]) > 0


def test_continuation_finds_the_polygon_threshold_and_a_fold():
    b = L.stability_threshold(2 * np.pi * np.arange(5) / 5, (-3.0, -1.0))
    assert b == pytest.approx(L.polygon_threshold(5), abs=1e-10)
    # n = 4, a pair at 0 and two tokens at ±a: −cos a = e^{β(cos a − cos 2a)} turns back at the largest β
    # of β(c) = log(−c)/((1 + 2c)(1 − c)), c = cos a: the branch is born in a fold there
    fold = -minimize_scalar(lambda c: -np.log(-c) / ((1 + 2 * c) * (1 - c)), bounds=(-0.5 + 1e-9, -1e-9),
                            method="bounded", options={"xatol": 1e-14}).fun
    b, branch = L.stability_threshold([0.0, 0.0, 2.1, 4.2], (-4.0, -0.01), beta=-3.0, branch=True)
    assert [e["type"] for e in branch.events] == ["fold"]
    assert b == pytest.approx(fold, abs=1e-9)


# -- the census, against the list derived by hand ----------------------------------------------------------
def _isosceles(beta):
    """n = 3, tokens at 0, ±a: besides the triangle (c = cos a = −1/2), −2c = e^{β(1 + 2c)(1 − c)}."""
    f = lambda c: np.log(-2 * c) - beta * (1 + 2 * c) * (1 - c)
    for lo, hi in ((-1.0, -0.5 - 1e-9), (-0.5 + 1e-9, -1e-12)):
        if f(lo) * f(hi) < 0:
            return brentq(f, lo, hi, xtol=1e-15)
    return None


@pytest.mark.parametrize("beta", [-1.0, -0.5, 2.0])
def test_the_census_for_three_tokens_is_the_list_derived_by_hand(beta):
    points = L.critical_points(3, beta)
    hand = {((3,), 0), ((2, 1), 2 if beta < -np.log(2) / 2 else 1),
            ((1, 1, 1), 0 if beta < -2 / 3 else 2)}
    c = _isosceles(beta)
    if c is not None:
        hand.add(((1, 1, 1), 1))
    assert {(p.clusters, p.morse_index) for p in points} == hand and len(points) == len(hand)
    assert all(p.certified and 1e-12 <= p.radius <= 1e-8 for p in points)
    if c is not None:
        iso = [p for p in points if p.clusters == (1, 1, 1) and p.morse_index == 1][0]
        cosines = np.sort((iso.points @ iso.points.T)[np.triu_indices(3, 1)])
        assert cosines[-1] == pytest.approx(c, abs=1e-12) or cosines[0] == pytest.approx(c, abs=1e-12)


def test_krawczyk_proves_a_zero_only_where_there_is_one():
    E = Energy(-1.0, 3)
    tri = 2 * np.pi * np.arange(3) / 3
    assert krawczyk(E, tri, 1e-10)[0] == "unique"
    assert krawczyk(E, tri + np.array([0, 1e-6, 0]), 1e-10)[0] == "none"
    assert krawczyk(E, tri + np.array([0, 1e-6, 0]), 1e-5)[0] == "unique"


@pytest.mark.parametrize("beta, classes", [(2.0, 3), (-1.0, 4)])
def test_branch_and_bound_closes_for_three_tokens(beta, classes):
    """The proof closes and its list is the census's (and the hand-derived one above)."""
    e = enclose(3, beta)
    assert e.complete and len(e.classes) == classes
    found = L.critical_points(3, beta, certify=False)
    assert [(p.clusters, p.morse_index) for p in found] == [(p.clusters, p.morse_index) for p in e.classes]
    # every zero modulo rotation: 1 synchronised, 3 labellings of (2, 1), 2 orientations of the triangle,
    # 6 of an isosceles triangle
    assert sum(e.counts) == len(e.zeros) == (6 if beta > 0 else 12)


def test_branch_and_bound_closes_for_four_tokens():
    e = enclose(4, 0.5)
    assert e.complete and [(p.clusters, p.morse_index) for p in e.classes] == \
        [((4,), 0), ((3, 1), 1), ((2, 2), 1), ((2, 1, 1), 2), ((1, 1, 1, 1), 3)]
    assert e.counts == [1, 4, 3, 12, 6]


def test_the_first_spurious_maximum_of_six_tokens_is_at_minus_two_thirds():
    beta, where = L.first_spurious_maximum(6, (-1.0, 0.0), step=0.1)
    assert beta == pytest.approx(-2 / 3, abs=1e-8)
    assert where.clusters == (2, 2, 2) and where.kind == "local max" and where.certified


def test_spheres_and_graphs():
    pts = L.critical_points(4, 1.0, dim=3, random_starts=2)
    assert pts[0].kind == "synchronised" and all(p.kind != "local max" for p in pts)
    assert not any(p.certified for p in pts)                     # certification is on S^1 only: said, not hidden
    # Kuramoto on a ring: the twisted state θ_i = 2πi/8 is a strict local maximum since the pair term
    # φ(u) = e^{β cos u}/β is concave at u = 2π/8 (β sin²u < cos u)
    ring = L.critical_points(8, 1.0, adjacency=L.ring_adjacency(8, 1), random_starts=0, certify=False)
    twisted = [p for p in ring if p.kind == "local max" and np.allclose(np.diff(np.sort(p.angles)), np.pi / 4)]
    A = L.ring_adjacency(8, 1)
    assert len(twisted) == 1 and certify_point(Energy(1.0, 8, adjacency=A), twisted[0]).certified


# -- the dynamics --------------------------------------------------------------------------------------
def test_the_flow_stays_at_a_maximum_and_leaves_a_saddle_along_its_unstable_direction():
    E = Energy(-1.0, 6)
    pts = L.critical_points(6, -1.0, certify=False, random_starts=4)
    top = next(p for p in pts if p.kind == "local max")
    assert stays_near(E, top.points, eps=1e-6, t_end=50.0) < 1e-5
    saddle = next(p for p in pts if p.kind == "saddle" and p.morse_index == 1)
    cos, rate, predicted = departure(E, saddle.points)
    assert cos > 0.999 and rate == pytest.approx(predicted, rel=1e-2)


@pytest.mark.slow
def test_the_ascent_flow_is_usa():
    solvers = pytest.importorskip("solvers")
    rng = np.random.default_rng(3)
    x0 = _random(5, 3, rng)
    t = np.linspace(0.0, 2.0, 5)
    ours = ascent(Energy(2.0, 5, 3), x0, t)
    sol = solvers.Particles(mf.Model(beta=2.0, dim=3, normalized=False)).solve(x0, t, rtol=1e-11, atol=1e-13,
                                                                               progress=False)
    assert np.max(np.abs(ours - np.asarray(sol.positions))) < 1e-8


# -- bad input ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, name", [
    ({"n": 1, "beta": 1.0}, "`n`"),
    ({"n": 3, "beta": np.nan}, "`beta`"),
    ({"n": 3, "beta": 1.0, "weights": [1.0, np.inf, 1.0]}, "`weights`"),
    ({"n": 3, "beta": 1.0, "weights": [1.0, -1.0, 1.0]}, "`weights`"),
    ({"n": 3, "beta": 1.0, "adjacency": [[0, 1, 0], [0, 0, 1], [0, 1, 0]]}, "`adjacency`"),
    ({"n": 3, "beta": 1.0, "adjacency": -np.ones((3, 3))}, "`adjacency`"),
])
def test_bad_input_names_the_argument(kwargs, name):
    with pytest.raises(mf.InvalidInput, match=name):
        L.critical_points(**kwargs)


def test_threshold_arguments_are_checked():
    with pytest.raises(mf.InvalidInput, match="`betas`"):
        L.stability_threshold([0.0, 2.0, 4.0], betas=(1.0, -1.0))
    with pytest.raises(mf.InvalidInput, match="`points`"):
        L.stability_threshold([0.0], betas=(-1.0, 1.0))
    with pytest.raises(mf.InvalidInput, match="`n`"):
        L.first_spurious_maximum(1)


def test_the_command_reads_ranges():
    from meanfield.cli import _join_negative_lists, build_parser

    args = build_parser().parse_args(_join_negative_lists(["landscape", "--n", "3..6", "--betas", "-6:2"]))
    assert args.n == [3, 4, 5, 6] and args.betas == [-6.0, 2.0]


@pytest.mark.parametrize("args, shown", [
    (["--n", "1"], ["--n", "`n`", ">= 2"]),
    (["--graph", "ring:5"], ["`graph`", "ring:k"]),
    (["--betas", "2:-6"], ["`betas`", "low < high"]),
])
def test_the_command_exits_2_in_one_line(args, shown, tmp_path, capsys):
    assert main(["landscape", *args, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(s in err[0] for s in shown), err


# -- slow: the full checks -----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("n", [3, 4, 5])
def test_branch_and_bound_closes_at_every_beta(n):
    """The census (20n random starts) finds exactly the critical points that the branch-and-bound proves
    (n = 5: about ten minutes on a loaded machine)."""
    for beta in (-3.0, -1.0, -0.5, 0.5, 2.0):
        e = enclose(n, beta)
        found = L.critical_points(n, beta, certify=False)
        assert e.complete
        assert [(p.clusters, p.morse_index) for p in found] == [(p.clusters, p.morse_index) for p in e.classes]


@pytest.mark.slow
def test_no_spurious_maximum_above_minus_0_16_every_point_certified():
    from meanfield.experiments.landscape import census_over_beta

    for n in range(2, 11):
        rows = census_over_beta(n, np.linspace(-0.16, 10.0, 200), certify="all", random_starts=2)
        assert all(r["certified"] for r in rows)
        assert not [r for r in rows if r["kind"] == "local max"]


@pytest.mark.slow
def test_the_experiment_passes(tmp_path):
    from meanfield.experiments import landscape

    report = landscape(tmp_path, n=(3, 4, 5), betas=(-3.0, 1.0), beta_count=9, theorem_n=3, theorem_betas=5,
                       complete_n=(3,), progress=False)
    assert report.passed
    assert {"landscape.nc", "summary.json", "eigenvalues.png", "maxima.png"} <= {p.name for p in tmp_path.iterdir()}
