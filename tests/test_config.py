"""meanfield.experiments.config reads what the solver classes declare: a new option is one edit, in the
solver (like tests/test_registry.py for the experiments' options)."""
import numpy as np
import pytest

import meanfield as mf
import solvers
from meanfield.experiments import config as cfgmod
from solvers.bases import ResolutionPolicy


class Toy(solvers.Solver):
    """A solver that only declares: its resolution ``cells``, one constructor option, its steppers."""

    steppers = ("dopri5", "bs32")
    policy = ResolutionPolicy("cells", low=2)
    config_name, config_aliases = "toy", ("toy-solver",)

    def __init__(self, model, cells=16, *, smooth=0.5):
        solvers.Solver.__init__(self, model)
        self.cells = self.policy.check(cells)
        if not 0 <= smooth <= 1:
            raise ValueError(f"`smooth` must be in [0, 1], got {smooth!r}.")
        self.smooth = smooth

    def _rhs(self, run, t, y):
        return -self.smooth * y

    def _representation(self, run):
        raise NotImplementedError

    def _initial_from_data(self, run, data, normalize):
        return np.asarray(data, float)


class ToyWithWidth(Toy):
    """One edit: a constructor keyword."""

    config_name, config_aliases = "toy", ()

    def __init__(self, model, cells=16, *, smooth=0.5, width=1.0):
        super().__init__(model, cells, smooth=smooth)
        self.width = width


class ToyWithBlend(Toy):
    """One edit: a solve option."""

    config_name, config_aliases = "toy", ()
    solve_options = {"blend": 1.0}


def _raw(solver):
    return {"solver": solver, "model": {"beta": 1.0, "dim": 2}, "initial": {"density": "uniform"},
            "times": {"t_end": 1.0}}


@pytest.fixture
def offer(monkeypatch):
    """Offer a solver class to configurations as `solvers` offers its own (its name in ``__all__``)."""
    def register(cls):
        monkeypatch.setattr(solvers, "Toy", cls, raising=False)
        monkeypatch.setattr(solvers, "__all__", [*solvers.__all__, "Toy"])
    return register


def test_a_toy_solver_is_configured_from_its_declarations(offer):
    offer(Toy)
    cfg = cfgmod.parse_config(_raw({"name": "toy-solver", "cells": 8, "smooth": 0.25, "rtol": 1e-6, "method": "bs32"}))
    solver = cfg.make_solver()
    assert type(solver) is Toy and (solver.cells, solver.smooth) == (8, 0.25)
    assert cfg.solver == "toy" and cfg.solver_options == {"smooth": 0.25}
    assert cfg.solve_options == {"rtol": 1e-6, "method": "bs32", "normalize": False}
    assert cfgmod.parse_config(_raw({"name": "toy"})).make_solver().cells == 16        # the signature's default
    with pytest.raises(ValueError, match=r"`solver.cells` must be >= 2"):
        cfgmod.parse_config(_raw({"name": "toy", "cells": 1}))
    with pytest.raises(ValueError, match=r"`solver.smooth` must be in \[0, 1\]"):
        cfgmod.parse_config(_raw({"name": "toy", "smooth": 2.0}))
    with pytest.raises(ValueError, match=r"`solver.rtol` must be > 0"):
        cfgmod.parse_config(_raw({"name": "toy", "rtol": -1.0}))
    with pytest.raises(ValueError, match=r"unknown key `solver.dt`.*max_step"):    # not an option of its steppers
        cfgmod.parse_config(_raw({"name": "toy", "dt": 0.1}))
    with pytest.raises(ValueError, match=r"unknown key `solver.width`.*smooth"):
        cfgmod.parse_config(_raw({"name": "toy", "width": 2.0}))


@pytest.mark.parametrize("cls, key, value, where", [(ToyWithWidth, "width", 2.0, "solver_options"),
                                                     (ToyWithBlend, "blend", 0.5, "solve_options")])
def test_a_new_solver_option_is_one_edit_in_the_solver(offer, cls, key, value, where):
    offer(cls)
    cfg = cfgmod.parse_config(_raw({"name": "toy", key: value}))
    assert getattr(cfg, where)[key] == value and type(cfg.make_solver()) is cls


def test_the_drift_between_config_and_solvers_is_gone():
    """The hand-over takes `chunk`, a Lagrangian run on S^1 the nodes its kernel needs (5 at β = 0, not the
    8 a hand-written table asked; its own check decides), Gegenbauer caps
    "auto" with `max_lmax`; each solver's keys are its constructor's, steppers' and solve options."""
    base = {"model": {"beta": 1.0, "dim": 2}, "initial": {"density": "uniform"}, "times": {"t_end": 1.0}}
    cfg = cfgmod.parse_config({**base, "solver": {"name": "fourier", "modes": 32, "on_underresolved": "lagrangian",
                                                  "handover": {"panels": 8, "chunk": 64}}})
    assert cfg.solve_options["on_underresolved"] == {"panels": 8, "chunk": 64}
    assert cfgmod.parse_config({**base, "model": {"beta": 0.0, "dim": 2},
                                "solver": {"name": "lagrangian", "nodes": 5}}).make_solver().labels.shape[0] == 5
    with pytest.raises(ValueError, match=r"`solver.nodes`=4 is too few"):
        cfgmod.parse_config({**base, "model": {"beta": 0.0, "dim": 2}, "solver": {"name": "lagrangian", "nodes": 4}})
    geg = cfgmod.parse_config({**base, "model": {"beta": 1.0, "dim": 5},
                               "solver": {"name": "gegenbauer", "lmax": "auto", "max_lmax": 48}})
    assert geg.make_solver().max_lmax == 48
    for cls in cfgmod.solver_classes().values():
        keys = cfgmod.SolverKeys.of(cls)
        assert {"rtol", "atol", "method"} <= set(keys.solve) or cls.steppers == ("ssprk3",)
        assert keys.resolution == cls.policy.name and set(keys.init) <= keys.accepted


def test_every_model_keyword_is_a_model_key():
    """[model] takes the keywords of meanfield.Model: the transformer layer's options from TOML, the
    feed-forward term as arrays."""
    rng = np.random.default_rng(0)
    W, U, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 2)), rng.standard_normal(3)
    m = {"beta": 1.0, "dim": 2, "mask": "causal", "position_bias": 0.5, "normalization": "pre",
         "mlp": [W.tolist(), U.tolist(), b.tolist()], "activation": "relu"}
    cfg = cfgmod.parse_config({"solver": {"name": "particles", "n": 8}, "model": m,
                               "initial": {"density": "uniform"}, "times": {"t_end": 1.0}}, build=False)
    model = cfg.model
    assert (model.mask, model.position_bias, model.normalization, model.activation) == ("causal", 0.5, "pre", "relu")
    np.testing.assert_array_equal(model.mlp[0], W)
    with pytest.raises(ValueError, match=r"`model.position_bias`"):
        cfgmod.parse_config({"solver": {"name": "particles"}, "model": dict(m, position_bias=-1.0),
                             "initial": {"density": "uniform"}, "times": {"t_end": 1.0}})
    with pytest.raises(ValueError, match=r"`solver.name`='gegenbauer'.*`mask`"):       # the solver refuses
        cfgmod.parse_config({"solver": {"name": "gegenbauer"}, "model": {"beta": 1.0, "dim": 2, "mask": "causal"},
                             "initial": {"density": "uniform"}, "times": {"t_end": 1.0}})
