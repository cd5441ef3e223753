"""Hypothesis profiles: "default" (deterministic, few examples: the property tests stay under a
minute) and "slow" (many random examples), which ``pytest -m slow`` selects together with every
property test. ``MEANFIELD_HYPOTHESIS_PROFILE`` or hypothesis' own ``--hypothesis-profile`` choose
a profile explicitly."""
import os

import pytest
from hypothesis import HealthCheck, settings

# one worker process per core already shares the cores: each runs the library on one thread unless a
# test names its threads (meanfield.threads)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("MEANFIELD_THREADS", "1")

settings.register_profile("default", max_examples=12, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("slow", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _slow_selected(config):
    expr = config.getoption("markexpr", "") or ""
    return "slow" in expr and "not slow" not in expr


def pytest_configure(config):
    chosen = os.environ.get("MEANFIELD_HYPOTHESIS_PROFILE") or config.getoption("hypothesis_profile", None)
    settings.load_profile(chosen or ("slow" if _slow_selected(config) else "default"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under ``-m slow`` the property tests run too (with the slow profile)."""
    if _slow_selected(config):
        for item in items:
            if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
                item.add_marker(pytest.mark.slow)


@pytest.fixture
def cf_failures():
    """``cf_failures(path, weight=3)``: the messages of the failed cf:1.11 checks of that weight
    (3: high priority) of the IOOS compliance checker on the file ``path``, less the one failure the
    files accept (`meanfield.spaces.gridded.CF_ACCEPTED_FAILURE`: t is a plain number, docs/output.md)."""
    runner = pytest.importorskip("compliance_checker.runner")
    from meanfield.spaces.gridded import CF_ACCEPTED_FAILURE

    def failures(path, weight=3):
        suite = runner.CheckSuite()
        suite.load_all_available_checkers()
        results, errors = suite.run_all(suite.load_dataset(str(path)), ["cf:1.11"], skip_checks=[])["cf:1.11"]
        assert not errors
        return [m for r in results if r.weight == weight
                and (r.value is False or (isinstance(r.value, tuple) and r.value[0] < r.value[1]))
                for m in (r.msgs or [r.name]) if not m.startswith(CF_ACCEPTED_FAILURE)]

    return failures
