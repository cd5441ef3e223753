"""The solver protocol: one `solve`, per-run state in a run, named steppers, options that apply.

Every solver is immutable after construction: two threads sharing one solver object get exactly
the results of two separate solvers, and a solver pickles to a worker process and back.
"""
import ast
import pathlib
import pickle
import threading

import numpy as np
import pytest

import meanfield as mf
import solvers
from solvers.base import Run
from solvers.timestepping import STEPPERS

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _sphere_points(n, d, seed):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _fem(model, **kw):
    """A FiniteElements solver, or a clean skip without the fem extra."""
    for module in ("mpi4py.MPI", "dolfinx"):          # mpi4py.MPI first: it loads the MPI library dolfinx links to
        pytest.importorskip(module, reason="the fem extra (dolfinx) is not installed")
    return solvers.FiniteElements(model, **kw)


def _cases(classes):
    """{label: (make, initials, options)}: the small runs each solver declares (`Solver.examples`)."""
    return {label: case for cls in classes.values() for label, case in cls.examples().items()}


SOLVERS = solvers.solver_classes()
CASES = _cases(SOLVERS)
T = np.linspace(0.0, 0.4, 5)


def _made(make):
    """The solver of a case, or a clean skip when it needs an extra that is not installed (fem)."""
    try:
        return make()
    except ModuleNotFoundError as exc:
        pytest.skip(f"{exc.name} is not installed")


def test_the_cases_cover_every_solver():
    assert len(SOLVERS) >= 8
    for name, cls in SOLVERS.items():
        assert cls.examples() and all(label.split("-")[0] == name for label in cls.examples()), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_threads_share_one_solver(name):
    make, initials, opts = CASES[name]
    shared = _made(make)
    alone = [make().solve(x, T, progress=False, **opts).data for x in initials]
    out = [None, None]

    def work(k):
        out[k] = shared.solve(initials[k], T, progress=False, **opts).data

    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for k in (0, 1):
        assert out[k] is not None, f"thread {k} failed"
        np.testing.assert_array_equal(out[k], alone[k])


@pytest.mark.parametrize("name", sorted(CASES))
def test_solver_pickles_and_runs_the_same(name):
    make, initials, opts = CASES[name]
    solver = _made(make)
    clone = pickle.loads(pickle.dumps(solver))
    np.testing.assert_array_equal(clone.solve(initials[0], T, progress=False, **opts).data,
                                  solver.solve(initials[0], T, progress=False, **opts).data)


def test_solve_is_defined_once():
    defs = []
    for path in sorted((ROOT / "solvers").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "solve":
                defs.append(path.name)
    assert defs == ["base.py"]


def test_options_that_do_not_apply_are_refused():
    fc = solvers.FourierCircle(mf.Model(beta=1.0, dim=2), modes=32)
    rho0 = mf.densities.uniform()
    with pytest.raises(ValueError, match=r"`dt` does not apply"):
        fc.solve(rho0, T, dt=0.1)
    with pytest.raises(ValueError, match=r"`method`"):
        fc.solve(rho0, T, method="euler-normalize")
    p = solvers.Particles(mf.Model(beta=1.0, dim=2))
    with pytest.raises(ValueError, match=r"`cfl` does not apply"):
        p.solve(_sphere_points(5, 2, 0), T, cfl=0.5)
    with pytest.raises(ValueError, match=r"`method`"):
        solvers.Particles(mf.Model(beta=1.0, dim=2, noise=0.1)).solve(_sphere_points(5, 2, 0), T, method="dopri5")
    assert set(STEPPERS) == {"dopri5", "bs32", "ssprk3", "euler-maruyama", "euler-normalize", "events"}


def test_options_that_do_not_apply_to_finite_elements_are_refused():
    fe = _fem(mf.Model(beta=1.0, dim=2), vertices=64)
    rho0 = mf.densities.uniform()
    with pytest.raises(ValueError, match=r"`rtol` does not apply"):
        fe.solve(rho0, T, rtol=1e-6)
    with pytest.raises(ValueError, match=r"`cfl`"):
        fe.solve(rho0, T, cfl=1.5)


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_every_solver_declares_steppers_it_can_drive(name):
    cls = SOLVERS[name]
    assert cls.steppers and set(cls.steppers) <= set(STEPPERS), cls.steppers
    for method in cls.steppers:
        missing = [h for h in STEPPERS[method].needs if not callable(getattr(cls, h, None))]
        assert not missing, (name, method, missing)


def test_continuing_a_run_from_a_solution_and_a_path(tmp_path):
    """Fixed steps (euler-normalize, and Euler–Maruyama with a seeded noise) continue bit for bit;
    the adaptive pair continues within 10·rtol."""
    x0 = _sphere_points(25, 3, 9)
    t = np.linspace(0, 2, 11)
    p = solvers.Particles(mf.Model(beta=2.0, dim=3))
    full = p.solve(x0, t, scheme="euler-normalize", dt=0.05)
    a = p.solve(x0, t[:6], scheme="euler-normalize", dt=0.05)
    b = p.solve(a, t[5:], scheme="euler-normalize", dt=0.05)
    np.testing.assert_array_equal(a.concat(b).positions, full.positions)
    noisy = solvers.Particles(mf.Model(beta=2.0, dim=3, noise=0.05))
    full = noisy.solve(x0, t, rng=3, dt=0.02)
    a = noisy.solve(x0, t[:6], rng=3, dt=0.02, checkpoint=tmp_path / "a.nc")
    b = noisy.solve(tmp_path / "a.nc", t[5:], dt=0.02)        # the seed travels with the saved Solution
    np.testing.assert_allclose(b.positions[-1], full.positions[-1], rtol=0, atol=1e-13)
    fc = solvers.FourierCircle(mf.Model(beta=3.0, dim=2), modes=64)
    rho0 = mf.densities.perturbed_uniform(0.1, 2)
    full = fc.solve(rho0, t, rtol=1e-10)
    b = fc.solve(fc.solve(rho0, t[:6], rtol=1e-10), t[5:], rtol=1e-10)
    err = np.max(np.abs(b.data[-1] - full.data[-1])) / np.max(np.abs(full.data[-1]))
    assert err < 10 * 1e-10
    with pytest.raises(ValueError, match=r"`t_eval` must start at t="):
        fc.solve(full, [0.0, 1.0])


def test_automatic_resolution_is_one_solution_with_the_final_resolution(tmp_path):
    model = mf.Model(beta=2.0, dim=3)
    rho0 = mf.densities.von_mises_fisher([0, 0, 1.0], 12.0)      # a cap that sharpens: 31 -> 63
    t = np.linspace(0, 0.5, 6)
    sol = solvers.SphericalHarmonics(model, lmax="auto").solve(rho0, t, checkpoint=tmp_path / "s.nc")
    lm = sol.diagnostics["lmax"]
    assert lm[0] == 31 and lm[-1] == 63 and np.all(np.diff(lm) >= 0) and sol.stats["segments"] == 2
    assert sol.representation.lmax == sol.stats["lmax_final"] == lm[-1]
    fixed = solvers.SphericalHarmonics(model, lmax=63).solve(rho0, t)
    x = _sphere_points(50, 3, 5)
    assert np.max(np.abs(sol.density(x) - fixed.density(x))) < 1e-5 * np.max(fixed.density(x))
    np.testing.assert_array_equal(mf.load(tmp_path / "s.nc").data, sol.data)


@pytest.mark.parametrize("name", sorted(CASES))
def test_per_run_values_are_declared(name):
    """Each solver's run is a dataclass with slots (its ``run_type``): every per-run value is a declared
    field, and a misspelt one is an error instead of a new attribute."""
    import dataclasses

    make, initials, opts = CASES[name]
    solver = _made(make)
    run = solver.start(initials[0], T, **{k: v for k, v in opts.items() if k != "rng"})
    assert type(run) is solver.run_type and issubclass(solver.run_type, Run) and dataclasses.is_dataclass(run)
    assert not hasattr(run, "__dict__")
    with pytest.raises(AttributeError):
        run.wieghts = None
    # a continuation on a refinement keeps the per-run values and starts with fresh work buffers
    run.workspace["buffer"] = 1
    again = run.derived(solver, run.y0, T[2:])
    assert type(again) is type(run) and again.workspace == {} and again.seed == run.seed
    base = {f.name for f in dataclasses.fields(Run)}
    for f in dataclasses.fields(run):
        if f.name not in base:
            a, b = getattr(again, f.name), getattr(run, f.name)
            assert a is b or (np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b), f.name


def test_a_solver_class_that_breaks_the_contract_is_refused_where_it_is_defined():
    """`Solver.__init_subclass__` checks the numbered contract of solvers/base.py and names the item."""
    from dataclasses import dataclass

    def define(**attrs):
        body = {"_rhs": lambda self, run, t, y: y, "_representation": lambda self, run: None,
                "_initial_from_data": lambda self, run, data, normalize: data}
        body.update(attrs)
        return type("Toy", (solvers.Solver,), {k: v for k, v in body.items() if v is not None})

    define()                                           # the smallest solver that keeps the contract
    cases = [({"steppers": ("rk4",)}, "item 2"), ({"steppers": ("ssprk3",)}, "item 8"),
             ({"solve_options": {"method": 1}}, "item 2"), ({"positional_options": ("weights",)}, "item 2"),
             ({"stepper_defaults": {"dt": 0.1}}, "item 2"), ({"retract_invariant": True}, "item 2"),
             ({"auto_resolution": "modes"}, "item 2"), ({"_initial_from_data": None}, "item 4"),
             ({"_rhs": None}, "item 5"), ({"solve": lambda self: None}, "item 9")]

    class Loose(Run):                                  # a Run subclass without declared fields
        pass

    @dataclass(eq=False)
    class WithDict(Run):
        extra: int = 0

    cases += [({"run_type": Loose}, "item 3"), ({"run_type": WithDict}, "item 3"), ({"run_type": dict}, "item 3")]
    for attrs, item in cases:
        with pytest.raises(TypeError, match=f"Toy breaks {item} of the solver contract"):
            define(**attrs)


def test_base_names_no_particular_solver():
    """The protocol module names no solver, and no strategy's own names: refinement, hand-over and any
    other change of discretisation reach it through the continuation hook `Solver._next` (its docstring
    may point to the strategy mixins as examples)."""
    import re

    text = (ROOT / "solvers" / "base.py").read_text()
    modules = sorted({cls.__module__.split(".")[-1] for cls in SOLVERS.values()})    # fourier, ..., particles
    names = sorted(SOLVERS) + modules + ["Refine", "handover_target", "handover_solver",
                                         "characteristics", "on_underresolved"]
    found = sorted({m.group(0) for m in re.finditer(r"\b(%s)\b" % "|".join(names), text, re.IGNORECASE)})
    assert not found, found


def test_a_continuation_changes_the_discretisation_where_the_run_stops():
    """`_next` on the monitor's `UnderResolved`: the run goes on from the state that failed the check on
    the discretisation it returns (here twice the modes), and `solve` returns one Solution."""

    class Doubling(solvers.FourierCircle):
        def _next(self, run, t, y, reason):
            if isinstance(reason, mf.UnderResolved) and self.modes < 192:
                finer = Doubling(self.model, modes=2 * self.modes, w1=False)
                return finer, self.basis.pad(y, finer.basis)
            return super()._next(run, t, y, reason)

    model = mf.Model(beta=4.0, dim=2)
    rho0 = mf.densities.von_mises_fisher([1.0, 0.0], 30.0)
    t = np.linspace(0.0, 1.0, 11)
    with pytest.raises(mf.UnderResolved) as info:
        solvers.FourierCircle(model, modes=48, w1=False).solve(rho0, t, rtol=1e-10)
    sol = Doubling(model, modes=48, w1=False).solve(rho0, t, rtol=1e-10)
    modes = sol.diagnostics["modes"]
    assert sol.status == 0 and modes[0] == 48 and modes[-1] > 48 and "handover_t" not in sol.stats
    np.testing.assert_array_equal(sol.t, t)
    k = len(info.value.solution.t)
    np.testing.assert_array_equal(sol.data[:k, :49], info.value.solution.data)    # the run up to its stop
    fine = solvers.FourierCircle(model, modes=int(modes[-1]), w1=False).solve(rho0, t, rtol=1e-10)
    assert np.max(np.abs(sol.data[-1] - fine.data[-1])) < 1e-6


def test_each_failure_of_the_stepper_is_its_exception_with_the_solution_so_far():
    """The stepper's `Failure` decides the exception: an interrupt is `Interrupted`, an error control that
    cannot be met a `SolverError` naming the step-size underflow; both carry the saved times before."""

    class Impatient(solvers.FourierCircle):
        def _monitor(self, run, t, y):
            if t > 0.3:
                raise KeyboardInterrupt
            return super()._monitor(run, t, y)

    model, t = mf.Model(beta=3.0, dim=2), np.linspace(0.0, 1.0, 6)
    rho0 = mf.densities.perturbed_uniform(0.1, 2)
    with pytest.raises(mf.Interrupted) as info:
        Impatient(model, modes=32, w1=False).solve(rho0, t)
    stopped = float(str(info.value).split("interrupted at t=")[1].split(";")[0])
    assert 0.3 < stopped <= 0.4 and list(info.value.solution.t) == list(t[:2])
    class Erratic(solvers.FourierCircle):          # a right-hand side that no step size makes smooth
        def _rhs(self, run, t, u):
            return 1e20 * np.random.default_rng().standard_normal(u.shape) + 0j

    with pytest.raises(mf.SolverError, match="step size underflow") as info:
        Erratic(model, modes=32, w1=False).solve(rho0, t)
    assert type(info.value) is mf.SolverError and list(info.value.solution.t) == [0.0]
