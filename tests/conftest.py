"""Hypothesis profiles: "default" (deterministic, few examples: the property tests stay under a
minute) and "slow" (many random examples), which ``pytest -m slow`` selects together with every
property test. ``MEANFIELD_HYPOTHESIS_PROFILE`` or hypothesis' own ``--hypothesis-profile`` choose
a profile explicitly."""
import importlib.util
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


# Cases of the slow tier named here rather than decorated (parametrised cases among them): each took
# 4-15 s on two idle cores, so the default suite keeps within its 3 minutes (docs/benchmarks.md). The
# slow tier (`pytest -m slow`) runs them; tests/test_suite_hygiene.py checks that every id still exists.
SLOW_CASES = frozenset({
    "tests/test_stationary.py::test_noisy_pde_lands_on_the_branch",
    "tests/test_causal_heads.py::test_layered_linear_response_of_two_slopes[2-True]",
    "tests/test_movies.py::test_long_runs_are_capped_and_memory_stays_bounded",
    "tests/test_sweep.py::test_experiments_on_two_workers_equal_serial",
    "tests/test_feedforward.py::test_on_the_circle_fourier_characteristics_and_particles_agree[sqrt-depth]",
    "tests/test_gaussian.py::test_particles_follow_the_moment_equations_of_their_own_sample",
    "tests/test_metastability.py::test_small_run_agrees_with_the_theory",
    "tests/test_experiments.py::test_iid_sampling_rate_on_circle",
    "tests/test_sweep.py::test_local_workers_are_forked_from_a_single_threaded_process",
    "tests/test_sweep.py::test_a_process_with_threads_spawns_its_workers",
    "tests/test_sweep.py::test_forked_workers_all_dead_is_an_error_not_a_hang",
    "tests/test_sweep.py::test_a_killed_run_leaves_no_worker_behind",
    "tests/test_threads.py::test_cli_threads",
    "tests/test_threads.py::test_results_do_not_depend_on_the_thread_count",
    "tests/test_kernelsums.py::test_a_forked_child_runs_the_fused_sums_on_its_own_thread",
    "tests/test_kernelsums.py::test_threads_give_the_same_bits[6]",
    "tests/test_docs.py::test_doc_examples_run[causal.md]",
    "tests/test_docs.py::test_doc_examples_run[lagrangian.md]",
    "tests/test_docs.py::test_doc_examples_run[movies.md]",
    "tests/test_docs.py::test_doc_examples_run[experiments.md]",
    "tests/test_docs.py::test_doc_examples_run[sphere.md]",
    "tests/test_docs.py::test_site_builds_strictly",
    "tests/test_cli.py::test_sigint_during_phase_diagram[1]",
    "tests/test_restart.py::test_resume_after_sigkill_equals_the_uninterrupted_run[particles-noise]",
    "tests/test_movies.py::test_the_command_line",
    "tests/test_examples.py::test_a_run_from_a_layered_causal_file",
    "tests/test_examples.py::test_every_example_runs[sphere]",
    "tests/test_causal_particles.py::test_every_token_converges_to_the_first[True]",
    "tests/test_causal_particles.py::test_masked_sums_do_not_depend_on_the_threads[100]",
    "tests/test_fem.py::test_mpi_two_ranks_match_one",
    "tests/test_experiments.py::test_mean_field_limit_circle_quick",
    "tests/test_causal_lagrangian.py::test_a_density_of_x_alone_moves_like_the_unmasked_equation",
    "tests/test_sample_tokens.py::test_law_at_each_position[3-2000]",
    "tests/test_sample_tokens.py::test_law_at_each_position[2-10000]",
    "tests/test_causal_heads.py::test_particle_field_of_two_slopes[True-2]",
    "tests/test_w1bracket.py::test_quasi_points_against_their_density[1000]",
    "tests/test_wasserstein.py::test_binned_method_is_within_its_bound",
    "tests/test_lagrangian_general.py::test_sphere_agrees_with_quasi_particles[2]",
    "tests/test_figures.py::test_verify_prop34_pictures",
    # 1.2-3.3 s of CPU each, with a sibling case (another parameter) left in the default tier
    "tests/test_output.py::test_no_failed_high_priority_cf_check[Lagrangian S^2-coefficients]",
    "tests/test_lagrangian_normalization.py::test_against_quasi_particles_on_the_circle[mix]",
    "tests/test_normalization.py::test_fourier_against_particles[ngpt]",
    "tests/test_stationary.py::test_branch_bifurcates_at_nu_c[super-2]",
    "tests/test_experiments.py::test_phase_diagram_on_two_threads_equals_one[euler-normalize-extra1]",
    "tests/test_experiments.py::test_attractive_flow_reaches_its_limit_energy[3-1.83]",
    "tests/test_lagrangian.py::test_error_estimate_bounds_error_against_4x_finer_run[labels1-finer1]",
    "tests/test_spectralsums.py::test_kernel_distance[3]",
    "tests/test_figures.py::test_run_pictures[sphere]",
    "tests/test_particles.py::test_noise_is_brownian_motion_on_the_sphere[3]",
    "tests/test_stationary.py::test_linearised_rate_matches_the_pde[False]",
    "tests/test_gegenbauer.py::test_agrees_with_spherical_harmonics_at_d3[vmf-USA]",
    "tests/test_fem.py::test_convergence_against_fourier_circle[False]",
    "tests/test_fem.py::test_convergence_sphere[False]",
    "tests/test_stationary.py::test_branch_bifurcates_at_nu_c[sub-2]",
    "tests/test_causal_continuum.py::test_picture_of_the_density_over_position_and_angle",   # tests/test_causal_pictures.py
    "tests/test_docs.py::test_doc_examples_run[landscape.md]",                               # tests/test_landscape.py
})


# the fem extra (dolfinx) may be missing: `.ci/setup` then installs requirements/lock-nofem.txt
HAVE_FEM = importlib.util.find_spec("dolfinx") is not None
FEM_MISSING = "dolfinx (the fem extra) missing"


def uses_fem(example):
    """Whether an example configuration (a TOML path) runs the finite elements, which need dolfinx."""
    import tomllib

    return tomllib.loads(example.read_text()).get("solver", {}).get("name") == "fem"


def _slow_selected(config):
    expr = config.getoption("markexpr", "") or ""
    return "slow" in expr and "not slow" not in expr


def pytest_configure(config):
    chosen = os.environ.get("MEANFIELD_HYPOTHESIS_PROFILE") or config.getoption("hypothesis_profile", None)
    settings.load_profile(chosen or ("slow" if _slow_selected(config) else "default"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Tests marked ``fem`` skip without dolfinx; the cases of `SLOW_CASES` are slow; under ``-m slow`` the property tests run too (with the slow
    profile). This runs before pytest deselects by marker."""
    slow = _slow_selected(config)
    for item in items:
        if not HAVE_FEM and item.get_closest_marker("fem"):
            item.add_marker(pytest.mark.skip(reason=FEM_MISSING))
        if item.nodeid in SLOW_CASES or (slow and getattr(getattr(item, "obj", None), "is_hypothesis_test", False)):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def cf_failures():
    """``cf_failures(path, weight=3)``: the messages of the failed cf:1.11 checks of that weight
    (3: high priority) of the IOOS compliance checker on the file ``path``, less the one failure the
    files accept (`meanfield.spaces.gridded.CF_ACCEPTED_FAILURE`: t is a plain number, docs/output.md)."""
    runner = pytest.importorskip("compliance_checker.runner")
    from meanfield.spaces.gridded import CF_ACCEPTED_FAILURE

    checked = {}

    def failures(path, weight=3):
        key = (str(path), os.stat(path).st_mtime_ns)
        if key not in checked:                  # one run of the checker per file gives every weight
            suite = runner.CheckSuite()
            suite.load_all_available_checkers()
            checked[key] = suite.run_all(suite.load_dataset(str(path)), ["cf:1.11"], skip_checks=[])["cf:1.11"]
        results, errors = checked[key]
        assert not errors
        return [m for r in results if r.weight == weight
                and (r.value is False or (isinstance(r.value, tuple) and r.value[0] < r.value[1]))
                for m in (r.msgs or [r.name]) if not m.startswith(CF_ACCEPTED_FAILURE)]

    return failures
