"""Error messages that tell the truth.

* Every hint in an error message ("pass normalize=True", "pass `batch=b`", ...) is followed here: the
  call that raised it, changed as the hint says, succeeds.
* A resolution too large for the machine is refused in the constructor, before any allocation,
  with the estimated memory in the message; through ``meanfield run`` with exit status 2 and one
  line naming the configuration key.
"""
import contextlib
import functools
import importlib
import importlib.util
import io
import tracemalloc

import numpy as np
import pytest

import meanfield as mf
import meanfield.validation as checks
import solvers

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _sphere_points(n, d, seed):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


X3 = _sphere_points(12, 3, 0)
X2 = _sphere_points(12, 2, 0)
FC = solvers.FourierCircle(mf.Model(beta=1.0, dim=2), modes=16, w1=False)
FC_SOL = FC.solve(mf.densities.uniform(), [0.0, 0.1])


def _batch_solution():
    x = np.stack([_sphere_points(6, 3, 1), _sphere_points(6, 3, 2)])
    return solvers.Particles(mf.Model(beta=1.0, dim=3)).solve(x, [0.0, 0.1])


def _fem_solution():
    if importlib.util.find_spec("dolfinx") is None:
        pytest.skip("dolfinx (the fem extra) missing")
    return solvers.FiniteElements(mf.Model(beta=1.0, dim=2), vertices=32).solve(mf.densities.uniform(), [0.0, 0.05])


def _gegenbauer():
    return solvers.Gegenbauer(mf.Model(beta=1.0, dim=3), lmax=16)


# (what raises, the hint in its message, the call the hint asks for)
HINTS = {
    "von_mises_fisher mean": (lambda: mf.densities.von_mises_fisher([0.0, 3.0, 4.0], 2.0),
                              r"Pass normalize=True to project the points",
                              lambda: mf.densities.von_mises_fisher([0.0, 3.0, 4.0], 2.0, normalize=True)),
    "particle positions": (lambda: solvers.Particles(mf.Model(beta=1.0, dim=3)).solve(2 * X3, [0, 0.1]),
                           r"Pass normalize=True to project the points",
                           lambda: solvers.Particles(mf.Model(beta=1.0, dim=3)).solve(2 * X3, [0, 0.1], normalize=True)),
    "particle weights": (lambda: solvers.Particles(mf.Model(beta=1.0, dim=3)).solve((X3, np.ones(12)), [0, 0.1]),
                         r"Pass normalize=True to rescale",
                         lambda: solvers.Particles(mf.Model(beta=1.0, dim=3)).solve((X3, np.ones(12)), [0, 0.1],
                                                                                    normalize=True)),
    "density mass": (lambda: FC.solve(lambda x: 2.0 + 0 * x[..., 0], [0, 0.1]), r"Pass normalize=True to rescale",
                     lambda: FC.solve(lambda x: 2.0 + 0 * x[..., 0], [0, 0.1], normalize=True)),
    "grid mass": (lambda: FC.solve(mf.densities.on_grid(np.full(8, 3.0)), [0, 0.1]), r"Pass normalize=True to rescale",
                  lambda: FC.solve(mf.densities.on_grid(np.full(8, 3.0)), [0, 0.1], normalize=True)),
    "coefficient mass": (lambda: FC.solve(np.array([2.0, 0.1]), [0, 0.1]), r"pass normalize=True",
                         lambda: FC.solve(np.array([2.0, 0.1]), [0, 0.1], normalize=True)),
    "gegenbauer mass": (lambda: _gegenbauer().solve(np.array([2.0, 0.1]), [0, 0.1]), r"Pass normalize=True",
                        lambda: _gegenbauer().solve(np.array([2.0, 0.1]), [0, 0.1], normalize=True)),
    "gegenbauer axis": (lambda: _gegenbauer().solve(mf.densities.von_mises_fisher([1.0, 0.0, 0.0], 1.0), [0, 0.1]),
                        r"pass `axis`",
                        lambda: solvers.Gegenbauer(mf.Model(beta=1.0, dim=3), lmax=16, axis=[1.0, 0.0, 0.0]).solve(
                            mf.densities.von_mises_fisher([1.0, 0.0, 0.0], 1.0), [0, 0.1])),
    "usa beyond e^690": (lambda: solvers.Particles(mf.Model(beta=800.0, dim=3, normalized=False)).solve(X3, [0, 1e-3]),
                         r"Pass rescale_time=True",
                         lambda: solvers.Particles(mf.Model(beta=800.0, dim=3, normalized=False)).solve(
                             X3, [0, 1e-3], rescale_time=True)),
    "method and scheme": (lambda: solvers.Particles(mf.Model(beta=1.0, dim=3)).solve(
                              X3, [0, 0.1], method="dopri5", scheme="euler-normalize"),
                          r"pass either `method` or `scheme`",
                          lambda: solvers.Particles(mf.Model(beta=1.0, dim=3)).solve(X3, [0, 0.1],
                                                                                    scheme="euler-normalize")),
    "batch measure": (lambda: _batch_solution().measure(-1), r"pass `batch=b`",
                      lambda: _batch_solution().measure(-1, batch=1)),
    "foreign solution": (lambda: FC.solve(_fem_solution(), [0.05, 0.1]), r"evaluate its density and pass a callable",
                         lambda: FC.solve(lambda x, s=_fem_solution(): s.density(x), [0.0, 0.05], normalize=True)),
    "particles to lagrangian": (lambda: solvers.Lagrangian(mf.Model(beta=1.0, dim=2), nodes=64).solve(
                                    solvers.Particles(mf.Model(beta=1.0, dim=2)).solve(X2, [0, 0.1]), [0.1, 0.2]),
                                r"for particles pass a density callable",
                                lambda: solvers.Lagrangian(mf.Model(beta=1.0, dim=2), nodes=64).solve(
                                    mf.densities.uniform(), [0.0, 0.1])),
    "lagrangian data array": (lambda: solvers.Lagrangian(mf.Model(beta=1.0, dim=2), nodes=64).solve(
                                  solvers.Lagrangian(mf.Model(beta=1.0, dim=2), nodes=64).solve(
                                      mf.densities.uniform(), [0, 0.1]).data[-1], [0.0, 0.1]),
                              r"pass the Solution",
                              lambda: solvers.Lagrangian(mf.Model(beta=1.0, dim=2), nodes=64).solve(
                                  solvers.Lagrangian(mf.Model(beta=1.0, dim=2), nodes=64).solve(
                                      mf.densities.uniform(), [0, 0.1]), [0.1, 0.2])),
    "measure to a spectral solver": (lambda: FC.solve((X2, np.full(12, 1 / 12)), [0, 0.1]),
                                     r"pass a density callable or an array of its own representation",
                                     lambda: FC.solve(FC_SOL.data[-1], [0, 0.1])),
}


@pytest.mark.parametrize("name", sorted(HINTS))
def test_every_hint_is_true(name):
    raises, hint, follow = HINTS[name]
    with pytest.raises(ValueError, match=hint):
        raises()
    follow()


def test_the_wasserstein_hint_names_methods_that_work(monkeypatch):
    W = importlib.import_module("meanfield.observables.wasserstein")      # (mf.wasserstein is the function)

    monkeypatch.setattr(W, "EXACT_MAX_SIZE", 100)
    a, b = (X3, np.full(12, 1 / 12)), (_sphere_points(12, 3, 5), np.full(12, 1 / 12))
    with pytest.raises(ValueError, match=r"pass method='binned'.*method='sinkhorn'.*method='sliced'"):
        mf.wasserstein(a, b)
    exact = W.wasserstein(a, b, method="exact")
    value, bound = mf.wasserstein(a, b, method="binned", n_bins=200, return_bound=True)
    assert abs(value - exact) <= bound + 1e-12
    assert mf.wasserstein(a, b, method="sliced") > 0
    assert mf.wasserstein(a, b, method="sinkhorn") >= exact - 1e-9


def test_hints_appear_only_where_the_argument_exists():
    """Functions without ``normalize`` do not suggest it."""
    for call in (lambda: mf.densities.von_mises_fisher([0, 0, 1.0], 1.0)(2 * X3),
                 lambda: mf.wasserstein((2 * X3, np.full(12, 1 / 12)), (X3, np.full(12, 1 / 12))),
                 lambda: mf.densities.mixture([mf.densities.uniform()] * 2, [1.0, 1.0]),
                 lambda: FC_SOL.density(2 * np.array([[1.0, 0.0]]))):
        with pytest.raises(ValueError) as info:
            call()
        assert "normalize" not in str(info.value), str(info.value)


# -- memory ---------------------------------------------------------------------------------------------
def _fem(dim, **kw):
    if importlib.util.find_spec("dolfinx") is None:
        pytest.skip("dolfinx (the fem extra) missing")
    return functools.partial(solvers.FiniteElements, mf.Model(beta=1.0, dim=dim), **kw)


# name: (a function that returns the call to refuse, with its inputs already built; the argument named)
HUGE = {
    "FourierCircle": (lambda: functools.partial(solvers.FourierCircle, mf.Model(beta=1.0, dim=2), modes=10 ** 6),
                      "modes"),
    "SphericalHarmonics": (lambda: functools.partial(solvers.SphericalHarmonics, mf.Model(beta=1.0, dim=3),
                                                     lmax=2000), "lmax"),
    "Particles-chunk": (lambda: functools.partial(solvers.Particles, mf.Model(beta=1.0, dim=3), chunk=10 ** 4),
                        "chunk"),
    "Particles-n": (lambda: functools.partial(solvers.Particles(mf.Model(beta=1.0, dim=3)).start,
                                              np.tile([0.0, 0.0, 1.0], (10 ** 6, 1))), "x0"),
    "Lagrangian": (lambda: functools.partial(solvers.Lagrangian, mf.Model(beta=1.0, dim=2), nodes=10 ** 6), "nodes"),
    "FiniteElements-S2": (lambda: _fem(3, refinement=8), "refinement"),
    "FiniteElements-S1": (lambda: _fem(2, vertices=10 ** 6), "vertices"),
    "Model": (lambda: functools.partial(mf.Model, beta=1.0, dim=10 ** 4), "dim"),
}


def _refused_without_allocating(call, match):
    """Raises ValueError matching ``match`` while the memory traced by Python and numpy (tracemalloc)
    never rises by 1 MiB: the refusal comes before the arrays it estimates. The call is made once
    untraced first, so that lazy imports do not count."""
    with pytest.raises(ValueError, match=match):
        call()
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=match):
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 ** 20, f"{peak / 2 ** 20:.1f} MiB allocated before the refusal"


@pytest.mark.parametrize("name", sorted(HUGE))
def test_too_large_for_memory_is_refused_up_front(name, monkeypatch):
    """On a machine with 256 MiB (patched), before any allocation: the message names the argument
    and the estimate."""
    make, arg = HUGE[name]
    monkeypatch.setattr(checks, "available_memory", lambda: 256 * 2 ** 20)
    _refused_without_allocating(make(), rf"`{arg}`.* needs about [0-9.]+ [GMT]iB of memory \(estimated\), more "
                                        r"than the 256 MiB of this machine")


def test_modes_of_a_hundred_million_are_refused_on_this_machine():
    _refused_without_allocating(lambda: solvers.FourierCircle(mf.Model(beta=1.0, dim=2), modes=10 ** 8),
                                r"`modes`=100000000 needs about 74.5 GiB of memory")


@pytest.mark.parametrize("key,value,name", [("modes", "100000000", "solver.modes"), ("beta", "1e12", "beta")])
def test_the_command_line_refuses_it_in_one_line(tmp_path, key, value, name):
    from meanfield.cli import main

    text = (ROOT / "examples" / "circle.toml").read_text()
    text = text.replace("modes = 256", f"modes = {value}") if key == "modes" else text.replace("beta = 4.0",
                                                                                              f"beta = {value}")
    cfg = tmp_path / "big.toml"
    cfg.write_text(text)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and f"`{name}`" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_a_negative_density_in_a_config_names_its_minimum(tmp_path):
    from meanfield.cli import main

    cfg = tmp_path / "neg.toml"
    cfg.write_text((ROOT / "examples" / "circle.toml").read_text().replace("amplitude = 0.1", "amplitude = 1.5"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 2
    assert "`initial`: the density must be non-negative; its minimum on 512 probe points is -0.5" in err.getvalue()
