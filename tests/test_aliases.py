"""The module names from before the floor plan stay valid (meanfield/_aliases.py): each old dotted name
is the very module of its new place, for imports, attributes and pickles."""
import importlib
import pickle
import subprocess
import sys

import numpy as np
import pytest

import meanfield as mf
from meanfield._aliases import FLOORS, MOVED


def test_every_moved_module_is_named_once_and_exists_at_its_new_place():
    names = [m for modules in FLOORS.values() for m in modules]
    assert len(names) == len(set(names)) == len(MOVED)
    for new in MOVED.values():
        assert importlib.import_module(new).__name__ == new


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_name_imports_the_same_module_object(old):
    new = importlib.import_module(MOVED[old])
    assert importlib.import_module(old) is new
    assert sys.modules[old] is new
    assert new.__spec__.name == MOVED[old]          # the module keeps its own spec


def test_from_an_old_module_import_a_name():
    from meanfield.positions import PositionRule
    from meanfield.solution import Solution
    from meanfield.kernels import kernel_multipliers
    import meanfield.transformer.positions

    assert PositionRule is meanfield.transformer.positions.PositionRule
    assert Solution is mf.Solution and kernel_multipliers is mf.kernel_multipliers


def test_an_old_module_is_an_attribute_and_public_names_keep_their_meaning():
    from meanfield import kernels, normalization

    assert mf.kernels is kernels is importlib.import_module("meanfield.transformer.kernels")
    assert normalization is importlib.import_module("meanfield.transformer.normalization")
    assert mf.densities is importlib.import_module("meanfield.measures.densities")
    import meanfield.wasserstein  # noqa: F401  (an old name; the function keeps the attribute)

    assert callable(mf.wasserstein) and not isinstance(mf.wasserstein, type(mf))
    with pytest.raises(AttributeError, match="no attribute 'not_a_module'"):
        mf.not_a_module


def test_old_names_in_a_fresh_interpreter():
    """The names not imported by ``import meanfield`` (found lazily by the finder) and dotted imports."""
    code = ("import meanfield.normalization as n, meanfield._fused as f, meanfield.transformer.normalization as m\n"
            "import meanfield.sums._fused as g, meanfield as mf\n"
            "assert n is m and f is g and mf.normalization is m and n.__spec__.name == m.__name__\n"
            "from meanfield.geodesic import tangent_frame\n"
            "from meanfield.spaces.geodesic import tangent_frame as t\n"
            "assert tangent_frame is t and callable(mf.wasserstein)\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_pickle_written_with_the_old_module_names_loads():
    model = mf.Model(beta=2.5, dim=3, V=np.diag([1.0, 2.0, 3.0]))
    new = pickle.dumps(model, protocol=0)
    assert b"cmeanfield.transformer.model\nModel\n" in new
    old = new.replace(b"cmeanfield.transformer.model\n", b"cmeanfield.model\n")
    loaded = pickle.loads(old)
    assert type(loaded) is mf.Model and loaded.beta == 2.5
    np.testing.assert_array_equal(loaded.V, model.V)
    schedule = mf.Schedule([0.0, 1.0], [{"beta": 1.0}, {"beta": 2.0}])
    text = pickle.dumps(schedule, protocol=0).replace(b"cmeanfield.transformer.schedule\n", b"cmeanfield.schedule\n")
    assert b"meanfield.schedule" in text and type(pickle.loads(text)) is mf.Schedule
