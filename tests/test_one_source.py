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
