"""A new solver is one module and nothing else (contract item 10 of solvers/base.py).

A toy module, written into a folder the `solvers` package reads, defines a solver of points that turn
on S^1 at the speed ω (x' = ωJx, its flow the rotation by ωt). Without any other edit it is a solver
of the package by its name, a TOML configuration runs it, `Solution.flow` re-runs it, the protocol
test's cases include it and the capability tables of the docs list it.
"""
import sys
import textwrap

import numpy as np
import pytest

import solvers
from solvers import capabilities

TOY = '''
    """Points that turn on S^1 at the speed ω: x' = ωJx (a toy for tests/test_new_solver.py)."""
    import numpy as np

    from meanfield.representations.particles import ParticleCloud
    from solvers.base import Solver
    from solvers.bases import ResolutionPolicy

    J = np.array([[0.0, -1.0], [1.0, 0.0]])


    class Toy(Solver):
        """n points at equal angles carrying the weights ρ_0(x_j)/Σρ_0, turned by the angle ωt."""

        policy = ResolutionPolicy("n", low=2)
        config_name = "toy"
        normalizations = ("post", "pre")

        def __init__(self, model, n=16, *, omega=1.0):
            Solver.__init__(self, model)
            self.n, self.omega = self.policy.check(n), float(omega)

        @classmethod
        def examples(cls):
            from meanfield.transformer.model import Model

            circle = np.stack([np.cos([0.1, 2.0, 4.0]), np.sin([0.1, 2.0, 4.0])], axis=-1)
            return {"Toy": (lambda: cls(Model(beta=1.0, dim=2), omega=2.0), [circle, circle[::-1]], {})}

        @classmethod
        def from_segment(cls, segment):
            return cls(segment.model, segment.data.shape[1], omega=segment.stats["omega"])

        def _initial_from_data(self, run, data, normalize):
            x = np.asarray(data, dtype=float)
            run.workspace["weights"] = np.full(len(x), 1.0 / len(x))
            return x

        def _initial_from_callable(self, run, rho0, normalize):
            angles = 2 * np.pi * np.arange(self.n) / self.n
            x = np.stack([np.cos(angles), np.sin(angles)], axis=-1)
            rho = np.asarray(rho0(x), dtype=float)
            run.workspace["weights"] = rho / rho.sum()
            return x

        def _initial_from_solution(self, run, sol):
            run.workspace["weights"] = sol.representation.weights
            return np.array(sol.data[-1])

        def _rhs(self, run, t, y):
            return self.omega * y @ J.T

        def _tracer_velocity(self, run, t, y, points):
            return self.omega * points @ J.T

        def _representation(self, run):
            return ParticleCloud(run.workspace["weights"], 2)

        def _stats(self, run):
            return {"omega": self.omega}
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The `solvers` package with one module more, ``solvers.toy`` (only for this test)."""
    (tmp_path / "toy.py").write_text(textwrap.dedent(TOY))
    monkeypatch.setattr(solvers, "__path__", [*solvers.__path__, str(tmp_path)])
    yield
    sys.modules.pop("solvers.toy", None)
    vars(solvers).pop("Toy", None)


def test_a_module_is_a_solver_of_the_package(toy):
    assert "Toy" in solvers.solver_classes() and solvers.Toy.__module__ == "solvers.toy"
    assert "Toy" in solvers.__all__


def test_a_toml_configuration_runs_it(toy):
    import tomllib

    from meanfield.experiments.config import parse_config
    from meanfield.experiments.run import simulate

    toml = '[solver]\nname = "toy"\nn = 12\nomega = 0.5\n[model]\nbeta = 1.0\ndim = 2\n[initial]\ndensity = "uniform"\n' \
           '[times]\nt_end = 1.0\n'
    sol = simulate(parse_config(tomllib.loads(toml)), progress=False)
    assert sol.solver == "Toy" and sol.data.shape == (sol.t.size, 12, 2)
    turned = np.exp(1j * (2 * np.pi * np.arange(12) / 12 + 0.5 * sol.t[-1]))      # the rotation by ωt
    np.testing.assert_allclose(sol.data[-1], np.stack([turned.real, turned.imag], -1), rtol=0, atol=1e-7)


def test_solution_flow_reruns_it(toy):
    from meanfield.transformer.model import Model

    sol = solvers.Toy(Model(beta=1.0, dim=2), 8, omega=2.0).solve(lambda x: 1 + 0 * x[..., 0], [0.0, 0.25, 0.5],
                                                                   rtol=1e-10, atol=1e-12)
    z = np.array([[1.0, 0.0], [0.0, 1.0]])
    phi = sol.flow(z)
    turn = 2.0 * 0.5
    np.testing.assert_allclose(phi[-1], z @ np.array([[np.cos(turn), np.sin(turn)], [-np.sin(turn), np.cos(turn)]]),
                               rtol=0, atol=1e-8)


def test_the_protocol_cases_include_it(toy, monkeypatch):
    import test_protocol

    cases = test_protocol._cases(solvers.solver_classes())
    assert "Toy" in cases
    monkeypatch.setattr(test_protocol, "CASES", cases)
    test_protocol.test_two_threads_share_one_solver("Toy")
    test_protocol.test_solver_pickles_and_runs_the_same("Toy")


def test_the_capability_tables_list_it(toy):
    assert "| `Toy` | yes | yes |" in capabilities.normalization_table()
    assert "Toy" in capabilities.steppers_table()
    assert "Toy" not in capabilities.feed_forward_table()        # it does not declare ``takes_mlp``
