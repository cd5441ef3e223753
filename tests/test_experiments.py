"""meanfield.experiments: configuration schema, Proposition 3.4 parts, mean-field rates, phase diagram."""
import importlib
import json
import pathlib
import tomllib

import numpy as np
import pytest

import meanfield as mf
from meanfield.experiments import config as cfgmod
from meanfield.experiments.report import Report, fit_exponential, fit_power_law
from conftest import uses_fem

pd = importlib.import_module("meanfield.experiments.phase_diagram")
vp = importlib.import_module("meanfield.experiments.verify_prop34")
mfl = importlib.import_module("meanfield.experiments.mean_field_limit")
ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.toml") if "[sweep]" not in p.read_text())  # run configs



def _base():
    return {"solver": {"name": "fourier", "modes": 64}, "model": {"beta": 1.0, "dim": 2},
            "initial": {"density": "perturbed_uniform", "amplitude": 0.2, "degree": 2}, "times": {"t_end": 1.0}}


# -- configuration ----------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.fem) if uses_fem(p) else p for p in EXAMPLES],
                         ids=[p.name for p in EXAMPLES])
def test_examples_validate(path):
    cfg = cfgmod.load_config(path)
    assert cfg.t_eval[0] == 0 and cfg.t_eval.size >= 2
    rho = cfg.density()
    d = cfg.model.dim
    if d <= 3:
        x, w = mf.sphere_quadrature(4000, d)
    else:                                               # a zonal density about e_d: Gauss–Gegenbauer in s
        from meanfield.spaces.quadrature import gauss_gegenbauer

        rule = gauss_gegenbauer(200, d)
        s, w = np.asarray(rule[0]), np.asarray(rule[1])
        x = np.zeros((s.size, d))
        x[:, 0], x[:, -1] = np.sqrt(1 - s ** 2), s
    assert abs(float(np.sum(w * rho(x))) - 1.0) < 1e-3      # a probability density (quadrature error)


def test_examples_cover_the_solvers():
    solvers_used = {tomllib.loads(p.read_text())["solver"]["name"] for p in EXAMPLES}
    assert {"fem", "fourier", "harmonics", "particles", "lagrangian", "gegenbauer"} <= solvers_used
    handover = cfgmod.load_config(ROOT / "examples" / "handover.toml")
    assert handover.solve_options["on_underresolved"] == {"panels": 32}


@pytest.mark.parametrize("solver, words", [
    ({"name": "lagrangian", "nodes": 60, "panels": 8}, ["`solver.nodes`", "panels × order"]),
    ({"name": "lagrangian", "panels": [0.0]}, ["`solver.panels`", "panel edges"]),
    ({"name": "lagrangian", "order": 1}, ["`solver.order`", ">= 2"]),
    ({"name": "fourier", "modes": 64, "max_modes": 512}, ["`solver.max_modes`", '"auto"']),
    ({"name": "fourier", "on_underresolved": "particles"}, ["`solver.on_underresolved`", "lagrangian"]),
    ({"name": "fourier", "handover": {"nodes": 512}}, ["`solver.handover`", "on_underresolved"]),
    ({"name": "fourier", "on_underresolved": "lagrangian", "handover": {"nodez": 5}},
     ["`solver.handover.nodez`", "panels"]),
])
def test_bad_lagrangian_and_handover_keys(solver, words):
    raw = _base()
    raw["solver"] = solver
    with pytest.raises(ValueError) as info:
        cfgmod.parse_config(raw)
    for w in words:
        assert w in str(info.value), str(info.value)
    raw["solver"] = {"name": "fourier", "on_underresolved": "lagrangian"}
    raw["model"]["noise"] = 0.1
    with pytest.raises(ValueError, match=r"`solver.on_underresolved`.*noise"):
        cfgmod.parse_config(raw)


def test_run_config_lagrangian_and_handover():
    """`meanfield run` with solver.name = "lagrangian" (panels), and a Fourier run handed over to it."""
    from meanfield.experiments import run

    raw = _base()
    raw["model"]["beta"] = 4.0
    raw["times"] = {"t_end": 6.0, "n_saves": 7}
    raw["solver"] = {"name": "lagrangian", "panels": 16}
    report = run(raw, None, progress=False)
    assert report.passed, report.checks
    assert report.solution.solver == "Lagrangian" and report.results["mass_error"] <= 1e-13
    raw["solver"] = {"name": "fourier", "modes": 24, "on_underresolved": "lagrangian", "handover": {"panels": 16}}
    report = run(raw, None, progress=False)
    assert report.passed, report.checks
    sol = report.solution
    assert [s.solver for s in sol.segments] == ["FourierCircle", "Lagrangian"] and sol.t[-1] == 6.0
    assert sol.segments[1].representation.n == 128 and 0 < sol.stats["handover_t"] < 6.0


@pytest.mark.parametrize("patch, words", [
    ({"solver": {"name": "fourier", "modez": 64}}, ["`solver.modez`", "modes"]),
    ({"solver": {"name": "spectral"}}, ["`solver.name`", "fourier", "particles"]),
    ({"solver": {"name": "fourier", "modes": 2}}, ["`solver.modes`", ">= 8"]),
    ({"solver": {"name": "harmonics"}}, ["`solver.name`", "model.dim"]),
    ({"model": {"beta": float("nan"), "dim": 2}}, ["`model.beta`", "finite"]),
    ({"model": {"beta": 1.0, "dim": 2, "temperature": 3}}, ["`model.temperature`", "beta"]),
    ({"model": {"beta": 1.0, "dim": 2, "normalized": "yes"}}, ["`model.normalized`", "True (SA) or False (USA)"]),
    ({"initial": {"density": "gaussian"}}, ["`initial.density`", "von_mises_fisher"]),
    ({"initial": {"density": "von_mises_fisher", "mean": [0, 1], "kapa": 2}}, ["`initial.kapa`", "kappa"]),
    ({"initial": {"density": "mixture", "components": []}}, ["`initial.components`"]),
    ({"initial": {"density": "mixture", "components": [{"density": "uniform", "x": 1}]}},
     ["`initial.components[0].x`"]),
    ({"times": {"values": [0.0, 2.0, 1.0]}}, ["`times.values`", "increasing"]),
    ({"times": {"t_end": 0.0}}, ["`times.t_end`", "> 0"]),
    ({"times": {"t_end": 1.0, "step": 0.1}}, ["`times.step`", "n_saves"]),
    ({"output": {"nmae": "x"}}, ["`output.nmae`", "name"]),
    ({"extra": {}}, ["`[extra]`", "[solver]"]),
])
def test_bad_config_names_the_key(patch, words):
    raw = _base()
    raw.update(patch)
    with pytest.raises(ValueError) as info:
        cfgmod.parse_config(raw)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_missing_table_and_bad_toml(tmp_path):
    raw = _base()
    del raw["times"]
    with pytest.raises(ValueError, match=r"`\[times\]`"):
        cfgmod.parse_config(raw)
    bad = tmp_path / "bad.toml"
    bad.write_text("[solver\nname = 1\n")
    with pytest.raises(ValueError, match="not valid TOML"):
        cfgmod.load_config(bad)
    with pytest.raises(ValueError, match="no such file"):
        cfgmod.load_config(tmp_path / "missing.toml")


def test_config_builds_mixture_and_times():
    raw = _base()
    raw["initial"] = {"density": "mixture", "weights": [0.25, 0.75],
                      "components": [{"density": "von_mises_fisher", "mean": [1.0, 0.0], "kappa": 3.0},
                                     {"density": "uniform"}]}
    raw["times"] = {"values": [0.0, 0.5, 2.0]}
    cfg = cfgmod.parse_config(raw)
    np.testing.assert_array_equal(cfg.t_eval, [0.0, 0.5, 2.0])
    x = np.array([[1.0, 0.0], [-1.0, 0.0]])
    vmf = mf.densities.von_mises_fisher([1.0, 0.0], 3.0)(x)
    np.testing.assert_allclose(cfg.density()(x), 0.25 * vmf + 0.75, rtol=1e-14)


def test_run_config_in_memory():
    """A tiny Fourier run: mass to round-off, energy monotone, every check passes."""
    from meanfield.experiments import run

    report = run(_base(), None, progress=False)
    assert report.passed, report.checks
    assert report.results["mass_error"] < 1e-12
    assert report.results["energy_final"] > report.results["energy_initial"]


# -- Proposition 3.4 ---------------------------------------------------------------------------------
def test_coefficients_positive_and_small_beta_limit():
    rows = vp.coefficient_table([1e-3, 1.0, 50.0, 500.0], [2, 3, 5])
    assert all(r["all_positive"] and r["decreasing"] for r in rows)
    assert min(r["min_turan"] for r in rows) >= 1.0
    for r in rows:
        assert r["l_eps"] <= r["l_underflow"]
    # a_1/a_0 → β/d as β → 0 (docs/mathematics.md §3)
    for d in (2, 3, 5):
        a = mf.kernel_multipliers(1e-3, d, 2)
        assert abs(a[1] / a[0] / (1e-3 / d) - 1) < 1e-3
    # floating point stops resolving a_l much later for large β (a_l/a_0 ≈ e^{-l²/2β})
    by = {(r["beta"], r["dim"]): r for r in rows}
    assert by[(500.0, 3)]["l_eps"] > 100 > by[(1.0, 3)]["l_eps"]


def test_landscape_gaps_nonnegative():
    rows = vp.landscape([0.5, 8.0], [2, 3], 4, np.random.default_rng(1), n=600)
    assert min(r["rel_gap_below"] for r in rows) >= -1e-12
    assert min(1 - r["position"] for r in rows) > 0
    # the concentrated ones are far from the uniform minimum
    assert max(r["position"] for r in rows) > 0.3


@pytest.mark.parametrize("n", [4, 6, 12])
def test_discrete_minimisers_are_sharp_configurations(n):
    x, e = vp.minimise_discrete_energy(n, 3, beta=6.0, starts=4, rng=0)
    ip = np.sort((x @ x.T)[np.triu_indices(n, 1)])
    np.testing.assert_allclose(ip, vp.design_inner_products(n), atol=1e-6)
    t = vp._DESIGNS[n][1]
    assert np.max(np.abs(vp.gegenbauer_moments(x, t))) < 1e-10        # a spherical t-design
    assert e > mf.uniform_energy(6.0, 3)                                # the continuum does better


def test_repulsive_flow_converges_at_exact_rate():
    sol, r = vp.repulsive_flow(2, coarse=True)
    assert r["linf"][-1] < 1e-3 * r["linf"][0]
    assert r["w1"][-1] < 1e-3 * r["w1"][0]
    assert abs(r["rate"] / r["exact_rate"] - 1) < 0.01


@pytest.mark.parametrize("dim, handover", [(2, 3.35), (3, 1.83)])
def test_attractive_flow_reaches_its_limit_energy(dim, handover):
    """(SA) β = 1 from a von Mises–Fisher density: one cluster, E_β within 1% of e^β/(2β) (measured 6e-4 on
    S^1, 1e-5 on S^2 at t = 8), past where the spectral solver stops (it hands over to the characteristics)."""
    sol, r = vp.attractive_flow(dim, coarse=True)
    e = r["energy"]
    assert np.all(np.diff(e) >= -1e-10 * e[:-1])
    assert abs(r["handover_t"] - handover) < 0.05 and sol.t[-1] == 8.0
    assert [s.solver for s in sol.segments][1] == "Lagrangian"
    assert r["gap"][0] > 0.4 and r["gap"][-1] <= 0.01 and np.all(r["gap"] > 0)     # below e^β/(2β), within 1%
    assert r["gap"][np.searchsorted(sol.t, handover)] > 0.05                      # not reached by the spectral run
    assert r["n_clusters"] == 1 and r["largest_cluster"] > 0.95
    assert abs(e[-1] - mf.dirac_energy(1.0)) <= 0.01 * mf.dirac_energy(1.0)


def _bessel_ratio(beta, dim, l):
    """a_l(β)/a_0(β) = I_{l+ν}(β)/I_ν(β), ν = d/2 − 1, in 50-digit arithmetic (docs/mathematics.md §3)."""
    import mpmath

    with mpmath.workdps(50):
        nu = mpmath.mpf(dim) / 2 - 1
        return mpmath.besseli(l + nu, beta) / mpmath.besseli(nu, beta)


def test_verify_prop34_parts_without_solvers(tmp_path):
    """The numbers of parts 1 and 2 against independent ones, not the report's own verdict: the degree
    l_eps where a_l/a_0 first drops below machine epsilon and the smallest Turán ratio from 50-digit
    Bessel functions; the landscape's gaps against the definition (uniform minimises, Dirac maximises)."""
    report = vp.verify_prop34(tmp_path, quick=True, parts=(1, 2), progress=False)
    rows = report.results["coefficients"]["rows"]
    assert len(rows) == 12 * 4
    for row in (rows[0], rows[17], rows[-1]):            # (β, d) = (1e-3, 2), (≈ 0.9, 3), (500, 8)
        beta, dim, l_eps = row["beta"], row["dim"], row["l_eps"]
        assert _bessel_ratio(beta, dim, l_eps) < np.finfo(float).eps <= _bessel_ratio(beta, dim, l_eps - 1)
        ratios = [_bessel_ratio(beta, dim, l) for l in range(min(l_eps + 1, 40))]
        turan = min(ratios[l] ** 2 / (ratios[l - 1] * ratios[l + 1]) for l in range(1, len(ratios) - 1))
        assert row["min_turan"] <= float(turan) * (1 + 1e-9) and row["min_turan"] >= 1.0
    land = report.results["landscape"]
    # the uniform measure attains the lower bound: its gap is rounding of the energy, whose size is
    # e^β/(2β) (β up to 30 here), so the gaps are compared relative to the width of the landscape
    assert land["min_rel_gap_below"] >= -1e-12 and land["min_rel_gap_above"] > 0.0
    assert land["min_gap_above"] > 0.0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["passed"] == report.passed
    assert {"coefficients.nc", "coefficients.png", "landscape.nc", "landscape.png"} <= set(summary["files"])


# -- phase diagram -----------------------------------------------------------------------------------
def test_equiangular_ode_closed_form_and_curve():
    t = np.linspace(0, 3, 13)
    for n in (2, 5, 32):
        exact = (np.exp(2 * t) - 1) / (np.exp(2 * t) + n - 1)          # β = 0, SA and USA
        np.testing.assert_allclose(pd.gamma_curve(0.0, n, t), exact, atol=1e-9)
        np.testing.assert_allclose(pd.gamma_curve(0.0, n, t, normalized=False), exact, atol=1e-9)
    # β = 0: γ(t*) = 1 − δ  ⟺  t* = ½ log(1 + n(1−δ)/δ)
    n, delta = 32, 1e-3
    assert abs(pd.gamma_crossing(0.0, n, delta) - 0.5 * np.log(1 + n * (1 - delta) / delta)) < 1e-7
    ts = [pd.gamma_crossing(b, n, delta) for b in (1.0, 3.0, 6.0)]
    assert ts[0] < ts[1] < ts[2]                                        # (SA): γ_β decreasing in β
    tu = [pd.gamma_crossing(b, n, delta, normalized=False) for b in (1.0, 3.0, 6.0)]
    assert tu[0] > tu[1] > tu[2]                                        # (USA): increasing in β


def test_pair_probability_uniform():
    assert abs(pd.pair_probability_uniform(3, 1e-3) - 0.5e-3) < 1e-15    # S^2: ⟨x,y⟩ uniform on [−1,1]
    assert abs(pd.pair_probability_uniform(2, 1e-3) - np.arccos(1 - 1e-3) / np.pi) < 1e-14
    x = mf.sampling.uniform_points(200 * 64, 3, 0).reshape(200, 64, 3)
    p = float(np.mean(pd.clustered_fraction(x, 0.05)))
    assert abs(p - 0.025) < 0.003


def test_phase_diagram_small(tmp_path):
    report = pd.phase_diagram(tmp_path, betas=[1.0, 6.0], realisations=32, t_end=12.0, n_times=13, progress=False)
    assert report.passed, report.checks
    p = np.asarray(report.results["p"])
    assert p[0, -1] > 0.9 and p[0, -1] >= p[1, -1]
    assert report.results["equiangular_max_error"] < 1e-6
    import xarray as xr

    with xr.open_dataset(tmp_path / "phase_diagram.nc") as ds:
        assert ds["p"].shape == (2, 13)


@pytest.mark.parametrize("scheme, extra", [("adaptive", {}), ("euler-normalize", {}),
                                           ("adaptive", dict(qk="gaussian", v="wishart", layer_period=2.0, mlp_width=4))])
def test_phase_diagram_on_two_threads_equals_one(tmp_path, scheme, extra):
    """--threads 2 runs the β on two threads at once, each run on one: the same numbers bit for bit
    (random parameters drawn per β and layer, and a feed-forward term, included)."""
    kw = dict(betas=[1.0, 3.0, 6.0], realisations=16, t_end=6.0, n_times=7, scheme=scheme, progress=False, **extra)
    one = pd.phase_diagram(tmp_path / "one", threads=1, **kw).results
    two = pd.phase_diagram(tmp_path / "two", threads=2, **kw).results
    assert np.array_equal(one["p"], two["p"]) and np.array_equal(one["p_stderr"], two["p_stderr"])
    assert one["equiangular_max_error"] == two["equiangular_max_error"] < 1e-6


# -- mean-field limit --------------------------------------------------------------------------------
def test_iid_sampling_rate_on_circle():
    """E W1(μ^N_0, ρ_0) ~ N^{-1/2} for iid samples on S^1 (docs/mathematics.md §8): fitted exponent within ±0.15."""
    model = mf.Model(beta=1.0, dim=2)
    rho0 = mf.densities.von_mises_fisher([0.0, 1.0], 2.0)
    ns = [100, 300, 1000, 3000, 10000, 30000]
    w1, _, _ = mfl.sampling_study(2, model, rho0, [0.0], ns, ("iid", "quasi"), 6, 0, coarse=True)
    p_iid, _ = fit_power_law(ns, w1["iid"][0])
    p_quasi, _ = fit_power_law(ns, w1["quasi"][0])
    assert abs(p_iid - 0.5) <= 0.15, p_iid
    assert p_quasi > 0.85, p_quasi                                      # quadrature points: O(1/N)


def test_mean_field_limit_circle_quick(tmp_path):
    from meanfield.experiments import mean_field_limit

    report = mean_field_limit(tmp_path, dims=(2,), quick=True, ns={2: [100, 316, 1000, 3162]}, progress=False)
    res = report.results["S1"]
    assert abs(res["rate_iid"][0] - 0.5) <= 0.15
    assert report.passed, [c for c in report.checks if not c["passed"]]
    assert mf.load(tmp_path / "pde_d2.nc").t.size == 2
    # the PDE's own W1 decay to the Dirac mass, fitted where 1e-10 < W1 < 1e-3, is the predicted rate 1
    fit = res["decay"]["fit_pde"]
    assert abs(fit["rate"] - 1.0) <= 0.02 and fit["points"] >= 30            # measured 1.00001
    assert 7 < fit["window"][0] < 8 and 23 < fit["window"][1] < 25
    assert abs(fit["exponential"] - 0.966) < 0.01                          # the t·e^(−t) prefactor on S^1
    assert len(mf.load(tmp_path / "pde_decay_d2.nc").segments) == 2


@pytest.mark.slow
def test_pde_decay_rate_on_the_sphere():
    model = mf.Model(beta=1.0, dim=3)
    rho0 = mf.densities.von_mises_fisher([0.0, 0.0, 1.0], 2.0)
    dec = mfl.decay_study(3, model, rho0, 26.0, 200, coarse=True)
    fit = dec["fit_pde"]
    assert abs(fit["rate"] - 1.0) <= 0.02 and fit["points"] >= 30            # measured 0.999997
    assert fit["prefactor"] < 1e-6 and abs(fit["exponential"] - 1.0) <= 0.02  # a plain exponential on S^2
    assert dec["handover_t"] < 2.0 and dec["w1_pde"][-1] < 1e-10


def test_fit_decay_rate_and_graded_panels():
    t = np.linspace(0.0, 30.0, 121)
    w = (0.08 * t + 1.2) * np.exp(-t)
    fit = mfl.fit_decay_rate(t, w)
    assert abs(fit["rate"] - 1.0) < 1e-8 and fit["exponential"] < 0.98
    fit = mfl.fit_decay_rate(t, 2.0 * np.exp(-1.3 * t))
    assert abs(fit["rate"] - 1.3) < 1e-7 and fit["prefactor"] < 1e-7
    assert np.isnan(mfl.fit_decay_rate(t[:3], w[:3])["rate"])
    edges = mfl.graded_panels(1.0, panels=8, levels=30)
    assert abs(edges[-1] - edges[0] - 2 * np.pi) < 1e-12 and np.all(np.diff(edges) > 0)
    assert np.min(np.abs(edges - 1.0)) == 0.0 and np.sort(np.abs(edges - 1.0))[1] == pytest.approx(np.pi * 2.0 ** -30)


# -- report helpers ----------------------------------------------------------------------------------
def test_fits_recover_exact_laws():
    n = np.array([10, 100, 1000.0])
    assert abs(fit_power_law(n, 3 * n ** -0.5)[0] - 0.5) < 1e-12
    t = np.linspace(0, 2, 5)
    assert abs(fit_exponential(t, 2 * np.exp(-1.7 * t))[0] - 1.7) < 1e-12


def test_report_guard_writes_partial_summary(tmp_path):
    report = Report("demo", tmp_path)
    report.check("something", True)
    with pytest.raises(KeyboardInterrupt):
        with report.guard():
            raise KeyboardInterrupt
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "interrupted" and not summary["passed"]
