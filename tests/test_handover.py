"""A spectral run that hands over to the characteristics when it stops resolving the density.

``on_underresolved="lagrangian"`` (docs/lagrangian.md): the result covers every requested time; its
spectral segment is the spectral run itself, and its Lagrangian segment agrees with a finer
spectral run while that one is resolved and with a Lagrangian run from t = 0.
"""
import numpy as np
import pytest

import meanfield as mf
import solvers
from meanfield.representations.segments import Piece, Segments
from solvers.lagrangian import Lagrangian

CIRCLE = mf.Model(beta=4.0, dim=2)
SPHERE = mf.Model(beta=2.0, dim=3)
TIGHT = dict(rtol=1e-10, atol=1e-12)


def circle_density(x):
    phases = np.random.default_rng(1).uniform(0, 2 * np.pi, 4)
    theta = np.arctan2(x[..., 1], x[..., 0])
    return 1 + 0.05 * np.cos(theta[..., None] * np.arange(1, 5) + phases).sum(-1)


sphere_density = mf.densities.von_mises_fisher([0.0, 0.6, 0.8], 3.0)


def node_errors(sol, ref):
    """max_j |ρ(x_j) − ρ_ref(x_j)| / max ρ_ref at the moving nodes of the Lagrangian segment of ``sol``,
    at the saved times ``ref`` reaches."""
    first, seg = sol.segments
    k = len(first.t)
    out = []
    for j in range(k, min(len(sol.t), len(ref.t))):
        x, _ = seg.representation.nodes(seg.data[j - k])
        rho = seg.representation.node_density(seg.data[j - k])
        r = ref.density(x, j)
        out.append(np.max(np.abs(rho - r)) / r.max())
    return np.array(out)


@pytest.fixture(scope="module")
def circle_runs():
    t = np.linspace(0.0, 5.0, 21)
    sol = solvers.FourierCircle(CIRCLE, modes=48, w1=False).solve(circle_density, t, on_underresolved="lagrangian",
                                                                  **TIGHT)
    with pytest.raises(mf.UnderResolved) as info:
        solvers.FourierCircle(CIRCLE, modes=48, w1=False).solve(circle_density, t, **TIGHT)
    finer = solvers.FourierCircle(CIRCLE, modes=256, w1=False).solve(circle_density, t, **TIGHT)
    return t, sol, info.value, finer


def test_circle_covers_the_range_and_keeps_the_spectral_run(circle_runs):
    t, sol, exc, _ = circle_runs
    np.testing.assert_array_equal(sol.t, t)
    assert sol.status == 0 and sol.solver == "FourierCircle+Lagrangian"
    spectral, lagrangian = sol.segments
    assert spectral.representation.name == "fourier" and lagrangian.representation.name == "lagrangian"
    # the spectral segment is the spectral run up to its failure, to the last bit
    np.testing.assert_array_equal(spectral.t, exc.solution.t)
    np.testing.assert_array_equal(spectral.data, exc.solution.data)
    assert sol.stats["handover_t"] == pytest.approx(exc.t, abs=0) and spectral.t[-1] <= exc.t < lagrangian.t[0]
    assert lagrangian.representation.n == 4 * (2 * 48 + 1)      # lagrangian_continuation's default
    assert np.max(np.abs(sol.mass - 1.0)) <= 1e-13
    e = sol.energy
    assert np.all(np.diff(e) > 0)                                  # attractive: (3.6)


def test_circle_agrees_with_finer_spectral_run_and_direct_lagrangian(circle_runs):
    t, sol, exc, finer = circle_runs
    assert finer.diagnostics["spectral_tail"].max() < 1e-6
    # from the hand-over on, the densities at the moving nodes are those of the finer spectral run
    # (1.5e-9: the hand-over state's own truncation error)
    err = node_errors(sol, finer)
    assert err.size >= 5 and err.max() <= 1e-8, err
    np.testing.assert_allclose(sol.energy, finer.energy, rtol=1e-10)
    direct = Lagrangian(CIRCLE, nodes=4 * 97).solve(circle_density, t)
    k = len(sol.segments[0].t)
    np.testing.assert_allclose(sol.energy[k:], direct.energy[k:], rtol=1e-10)
    np.testing.assert_array_equal(sol.diagnostics["n_clusters"][k:], direct.diagnostics["n_clusters"][k:])


def test_sphere_hands_over_to_a_given_lagrangian():
    t = np.linspace(0.0, 1.4, 15)
    lag = Lagrangian(SPHERE, nodes=800)
    sol = solvers.SphericalHarmonics(SPHERE, lmax=24).solve(sphere_density, t, on_underresolved=lag, **TIGHT)
    finer = solvers.SphericalHarmonics(SPHERE, lmax=48).solve(sphere_density, t, **TIGHT)
    assert finer.diagnostics["spectral_tail"].max() < 1e-6
    spectral, lagrangian = sol.segments
    assert spectral.representation.lmax == 24 and lagrangian.representation.n == lag.nodes
    assert 0.5 < sol.stats["handover_t"] < 0.7                       # lmax 24 stops at t = 0.67
    err = node_errors(sol, finer)
    assert err.size >= 7 and err.max() <= 1e-9, err                  # measured 2e-11
    np.testing.assert_allclose(sol.energy, finer.energy, rtol=1e-11)
    direct = lag.solve(sphere_density, t)
    k = len(spectral.t)
    np.testing.assert_allclose(sol.energy[k:], direct.energy[k:], rtol=1e-10)
    assert np.isfinite(sol.diagnostics["error_estimate"][-1])


def test_round_trip_and_continuation(tmp_path, circle_runs):
    t, sol, _, _ = circle_runs
    path = sol.save(tmp_path / "handover.nc")
    back = mf.load(path)
    assert isinstance(back.representation, Segments) and back.solver == sol.solver
    assert [s.solver for s in back.segments] == ["FourierCircle", "Lagrangian"]
    assert all(isinstance(p, Piece) for p in back.data)
    np.testing.assert_array_equal(back.t, sol.t)
    np.testing.assert_array_equal(back.energy, sol.energy)
    x = mf.sphere_quadrature(64, 2)[0]
    for i in (0, 3, len(t) - 1):
        np.testing.assert_array_equal(back.density(x, i), sol.density(x, i))
        np.testing.assert_array_equal(back.measure(i)[0], sol.measure(i)[0])
    np.testing.assert_array_equal(back.diagnostics["n_clusters"], sol.diagnostics["n_clusters"])
    one = back[len(t) - 1]
    assert one.t.size == 1 and one.density(x, 0)[0] == sol.density(x, -1)[0]
    # the saved run goes on along the characteristics, exactly (the same labels, continued)
    more = solvers.FourierCircle(CIRCLE, modes=48).solve(path, [5.0, 6.0], on_underresolved="lagrangian")
    assert more.solver == "Lagrangian" and more.representation.n == sol.segments[1].representation.n
    np.testing.assert_allclose(more.data[0], sol.segments[1].data[-1], rtol=0, atol=1e-15)   # renormalised
    longer = Lagrangian(CIRCLE, nodes=4 * 97).solve(sol.segments[1][:1], [sol.t[len(sol.segments[0].t)], 5.0, 6.0])
    np.testing.assert_allclose(more.energy[-1], longer.energy[-1], rtol=1e-10)


def test_checkpoint_of_a_handover_run_loads(tmp_path):
    path = tmp_path / "partial.nc"
    sol = solvers.FourierCircle(CIRCLE, modes=48, w1=False).solve(
        circle_density, np.linspace(0.0, 4.0, 9), on_underresolved="lagrangian", checkpoint=path, checkpoint_every=0.0)
    back = mf.load(path)
    assert len(back.segments) == 2
    np.testing.assert_array_equal(back.t, sol.t)


def test_default_still_raises_and_bad_options():
    t = np.linspace(0.0, 5.0, 6)
    with pytest.raises(mf.UnderResolved):
        solvers.FourierCircle(CIRCLE, modes=48, w1=False).solve(circle_density, t)
    with pytest.raises(ValueError, match=r"`on_underresolved`"):
        solvers.FourierCircle(CIRCLE, modes=48).solve(circle_density, t, on_underresolved="particles")
    with pytest.raises(ValueError, match=r"`on_underresolved`.*noise"):
        noisy = mf.Model(beta=4.0, dim=2, noise=0.1)
        solvers.FourierCircle(noisy, modes=48).solve(circle_density, t, on_underresolved="lagrangian")
    with pytest.raises(ValueError, match=r"`on_underresolved`.*same model"):
        other = Lagrangian(mf.Model(beta=3.0, dim=2), nodes=256)
        solvers.FourierCircle(CIRCLE, modes=48).solve(circle_density, t, on_underresolved=other)
    with pytest.raises(ValueError, match=r"`on_underresolved`"):
        solvers.Particles(CIRCLE).solve(mf.sphere_quadrature(64, 2)[0], t, on_underresolved="lagrangian")


def test_default_labels_are_capped():
    """"lagrangian" takes 4(2K + 1) labels (2(lmax + 2)² on S^2), at most 4100 (4608): a step costs O(n²)."""
    from solvers.lagrangian import MAX_DEFAULT_NODES, continuation_solver

    fine = solvers.FourierCircle(CIRCLE, modes=2048, w1=False).solve(circle_density, [0.0])
    assert continuation_solver(fine).nodes == MAX_DEFAULT_NODES[2] == 4100
    coarse = solvers.FourierCircle(CIRCLE, modes=48, w1=False).solve(circle_density, [0.0])
    assert continuation_solver(coarse).nodes == 4 * 97
    assert continuation_solver(coarse, panels=8).nodes == 64


# -- the density between the labels on S^2 after a hand-over ------------------------------------------------
def turning(x, s):
    """A first-degree bump whose direction turns with the token position s (mass 1 at every s)."""
    return 1 + 0.6 * (x[..., 0] * np.cos(2 * s) + x[..., 1] * np.sin(2 * s))


def check_density_between_labels(sol, positions=(None,)):
    """At every saved time of the labels' segment and every position: the labels carry mass 1 (to round-off:
    the hand-over scales them to the spectral state's mass), the density between them is finite, at most
    e^{1/4} times the labels' largest ρ, exact at the labels while they resolve the density, and once
    they do not its mass on a Gauss–Legendre rule exact to the kernel's degree is 1 to 1e-12 (the
    band-limited kernel density: mass Σ_j w_j by construction). Returns the largest ρ at the labels."""
    from meanfield.spaces.quadrature import gauss_legendre
    from meanfield.representations.lagrangian import kernel_degree
    first, labels = sol.segments
    L = kernel_degree(labels.representation.n)
    rule = gauss_legendre(L // 2 + 1, L + 1)
    top = 0.0
    for i in range(len(first.t), len(sol.t)):
        for s in positions:
            at = {} if s is None else {"position": s}
            rep, data = _at(sol, i, s)
            rho_labels = rep.node_density(data)
            assert rep.mass(data) == pytest.approx(1.0, abs=1e-13)
            rho = sol.density(rule.points, i, **at)
            assert np.all(np.isfinite(rho)) and rho.min() >= 0 and rho.max() <= np.exp(0.25) * rho_labels.max()
            if rep.resolves(data):
                np.testing.assert_allclose(sol.density(rep.nodes(data)[0], i, **at), rho_labels, rtol=1e-12)
            else:
                assert abs(rule.weights @ rho - 1) < 1e-12
            top = max(top, rho_labels.max())
    return top


def _at(sol, i, s):
    """(LagrangianNodes, slice) of saved index i of a hand-over run, at position s of a layered one."""
    part = sol[i]
    rep, data = part.representation, part.data[0]
    return (rep, data) if s is None else rep.at(data, s)


def test_sphere_density_between_labels_has_mass_one():
    """β = 2 on S^2, lmax 16 handed over to 98 labels, to t = 6: every saved time after the hand-over
    (`check_density_between_labels`); the labels cluster (ρ far above the kernel density's peaks)."""
    sol = solvers.SphericalHarmonics(SPHERE, 16).solve(mf.densities.perturbed_uniform(0.3, 2), [0.0, 2.0, 4.0, 6.0],
                                                       on_underresolved={"nodes": 98})
    assert sol.segments[1].representation.name == "lagrangian" and sol.stats["handover_t"] < 2.0
    assert check_density_between_labels(sol) > 100


@pytest.mark.slow
@pytest.mark.parametrize("masked", [True, False], ids=["causal", "unmasked"])
def test_sphere_density_between_labels_of_the_issue_run(masked, tmp_path):
    """The run of issue 48: β = 2, lmax 32 (16 positions, λ = 1 under the causal mask), handed over to 256
    labels (242 on the Gauss grid), t = 0 ... 10: mass 1 and the bound at every saved time and at positions
    on and between the nodes (the labels reach ρ ≈ 6e6); `plot` and `animate` (11 frames) draw it."""
    if masked:
        model, kw = mf.Model(2.0, 3, mask="causal", position_bias=1.0), {"positions": 16}
        rho0, positions = turning, (0.1, 0.5, 0.77, 1.0)
    else:
        model, kw = SPHERE, {}
        rho0, positions = (lambda x: 1 + 0.6 * x[..., 0] + 0.3 * x[..., 1] * x[..., 2]), (None,)
    sol = solvers.SphericalHarmonics(model, 32, **kw).solve(rho0, np.linspace(0.0, 10.0, 11),
                                                            on_underresolved={"nodes": 256})
    assert check_density_between_labels(sol, positions) > 1e6
    sol.plot(path=tmp_path / "run.png")
    sol.animate(tmp_path / "run.gif")
    assert (tmp_path / "run.png").stat().st_size > 0 and (tmp_path / "run.gif").stat().st_size > 0
