"""One thread control (meanfield.threads, docs/threads.md): its default, every solver and distance,
the CLI's ``--threads`` and TOML's ``[solver] threads``, results that do not depend on it, BLAS held
to one thread while a solver runs."""
import dataclasses
import inspect
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import meanfield as mf
import solvers
from meanfield.experiments.config import solver_classes
from meanfield.cli import main
from meanfield.experiments.options import EXPERIMENTS, Options, experiment, option
from meanfield.sums.spectralsums import zonal_sums
from meanfield.threads import check_threads, default_threads, machine_threads, share_out, use_threads


def test_default_follows_use_threads_then_the_environment(monkeypatch):
    monkeypatch.delenv("MEANFIELD_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert default_threads() == machine_threads() >= 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3 and check_threads(None) == 3 and check_threads(2) == 2
    monkeypatch.setenv("MEANFIELD_THREADS", "5")
    assert default_threads() == 5
    with use_threads(2):
        assert default_threads() == 2
        with use_threads(7):
            assert default_threads() == 7
        with use_threads(None):
            assert default_threads() == 2
        assert default_threads() == 2
    assert default_threads() == 5
    monkeypatch.setenv("MEANFIELD_THREADS", "zero")            # not a count: the next one decides
    assert default_threads() == 3


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_bad_thread_counts_name_threads(bad):
    with pytest.raises(ValueError, match="`threads`"):
        check_threads(bad)
    with pytest.raises(ValueError, match="`threads`"):
        with use_threads(bad):
            pass


def test_every_solver_takes_threads_and_reads_the_default():
    classes = set(solver_classes().values()) | {solvers.Gaussian}
    assert {solvers.Particles, solvers.SphericalHarmonics, solvers.FourierCircle, solvers.Lagrangian,
            solvers.Gegenbauer, solvers.FiniteElements} <= classes
    for cls in classes:
        assert "threads" in inspect.signature(cls).parameters, cls.__name__
    for cls in (solvers.Particles, solvers.SphericalHarmonics, solvers.Lagrangian, solvers.Gegenbauer,
                solvers.Gaussian):
        model = mf.Model(beta=1.0, dim=3)
        with use_threads(3):
            assert cls(model).threads == 3
        assert cls(model, threads=2).threads == 2
        with pytest.raises(ValueError, match="`threads`"):
            cls(model, threads=0)


def test_nthreads_is_the_older_name_of_threads():
    model = mf.Model(beta=1.0, dim=3)
    with pytest.warns(FutureWarning, match="`threads`"):
        assert solvers.SphericalHarmonics(model, lmax=16, nthreads=2).threads == 2
    with pytest.raises(ValueError, match="`threads`"):
        solvers.SphericalHarmonics(model, lmax=16, threads=1, nthreads=2)


def test_results_do_not_depend_on_the_thread_count():
    """The same numbers on one and two threads: the harmonics RHS (ducc0), spectral particle sums,
    the kernel distance and the W1 bracket (its cell integrals shared among threads)."""
    model = mf.Model(beta=2.0, dim=3)
    rho0 = lambda x: 1 + 0.3 * x[..., 2] + 0.2 * x[..., 0] * x[..., 1]
    f = [solvers.SphericalHarmonics(model, lmax=40, threads=k).start(rho0) for k in (1, 2)]
    np.testing.assert_allclose(f[0].rhs(0.0, f[0].y0), f[1].rhs(0.0, f[1].y0), rtol=0, atol=1e-14)
    x = mf.sample(rho0, 70_000, 3, method="quasi")
    y = mf.sample(lambda p: np.ones(p.shape[:-1]), 70_000, 3, rng=2)
    w = np.full(len(x[0]), 1 / len(x[0]))
    sums = [zonal_sums(2.0, 3, threads=k).sums(x[0], x[0], w) for k in (1, 2)]
    assert sums[1][0].shape == (70_000,) and zonal_sums(2.0, 3, threads=2).threads == 2
    for one, two in zip(*sums):
        np.testing.assert_array_equal(one, two)
    d = [mf.kernel_distance(x, y, threads=k) for k in (1, 2)]
    assert d[0] == pytest.approx(d[1], rel=1e-12, abs=0) and d[0] > 1e-3
    x = mf.sample(rho0, 20_000, 3, method="quasi")
    b = [mf.w1_bracket(x, rho0, threads=k) for k in (1, 2)]
    assert b[0].lower == pytest.approx(b[1].lower, rel=1e-12) and b[0].upper == pytest.approx(b[1].upper, rel=1e-12)
    assert mf.wasserstein(x, rho0, method="bracket", threads=2).upper == pytest.approx(b[0].upper, rel=1e-12)


def test_share_out_runs_every_part_once():
    done = []
    share_out(done.append, range(100), 3)
    assert sorted(done) == list(range(100))


def test_share_out_inside_a_part_runs_its_parts_on_that_thread():
    """Work that shares out its own parts (a layered run's positions, each with its batched transforms):
    the inner parts run on the thread of the outer part, every one once, with no wait on the pool."""
    done, where = [], {}
    lock = threading.Lock()

    def outer(k):
        def inner(j):
            with lock:
                done.append((k, j))
                where.setdefault(k, set()).add(threading.get_ident())
        share_out(inner, range(5), 2)

    share_out(outer, range(6), 2)
    assert sorted(done) == [(k, j) for k in range(6) for j in range(5)]
    assert all(len(threads) == 1 for threads in where.values())


def _blas_threads():
    return max((lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"), default=None)


@pytest.mark.parametrize("cls", [solvers.SphericalHarmonics, solvers.Lagrangian])
def test_a_run_holds_blas_to_one_thread(cls):
    seen = []

    class Recording(cls):
        def _rhs(self, run, t, y):
            seen.append(_blas_threads())
            return super()._rhs(run, t, y)

    model = mf.Model(beta=1.0, dim=3)
    with threadpool_limits(limits=2, user_api="blas"):
        if _blas_threads() != 2:
            pytest.skip("no BLAS that can run two threads")
        solver = Recording(model, 16) if cls is solvers.SphericalHarmonics else Recording(model, nodes=64)
        solver.solve(lambda x: 1 + 0.2 * x[..., 2], [0.0, 0.1], progress=False)
        assert seen and set(seen) == {1}
        assert _blas_threads() == 2


class Report:
    checks, passed = [], True

    def lines(self):
        return ["toy"]


@dataclasses.dataclass
class ToyOptions(Options):
    """A toy."""
    n: int = option(1, "size", low=1)


def _toy(name, record, seen):
    """A registered toy experiment that appends record() to ``seen`` (popped by the caller)."""

    @experiment(name, ToyOptions, help="toy", parallel=False)
    def toy(out, o, *, quick, progress):
        seen.append(record())
        return Report()
    return toy


def test_experiments_take_threads_and_run_inside_it(capsys):
    for exp in EXPERIMENTS.values():
        assert inspect.signature(exp.function).parameters["threads"].default is None, exp.name
    seen = []
    toy = _toy("toy-threads", default_threads, seen)
    try:
        toy(threads=3)
        with use_threads(2):
            toy()
        assert seen == [3, 2]
        assert main(["toy-threads", "--threads", "5", "--out", "never"]) == 0 and seen[-1] == 5
        assert main(["toy-threads", "--threads", "0", "--out", "never"]) == 2
        assert "`threads` must be >= 1, got 0" in capsys.readouterr().err
    finally:
        EXPERIMENTS.pop("toy-threads")


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "meanfield", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_threads(tmp_path):
    bad = _cli("verify-prop34", "--threads", "0", "--out", str(tmp_path))
    assert bad.returncode == 2 and "`threads`" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    cfg = tmp_path / "c.toml"
    cfg.write_text('[solver]\nname = "fourier"\nmodes = 64\nthreads = 0\n[model]\nbeta = 1.0\ndim = 2\n'
                   '[initial]\ndensity = "perturbed_uniform"\namplitude = 0.1\ndegree = 2\n[times]\nt_end = 0.1\n')
    bad = _cli("run", str(cfg), "--out", str(tmp_path / "o"))
    assert bad.returncode == 2 and "threads" in bad.stderr
    cfg.write_text(cfg.read_text().replace("threads = 0", "threads = 1"))
    good = _cli("run", str(cfg), "--out", str(tmp_path / "o"), "--threads", "2", "--no-progress")
    assert good.returncode == 0, good.stderr


# -- BLAS held from several threads at once, and tasks shared among threads ----------------------------
def test_blas_stays_on_one_thread_when_runs_on_two_threads_overlap():
    """threadpoolctl >= 3.8 ignores a limit set from another thread than the first one that set it:
    a run that starts on thread B while the run on thread A ends must still hold BLAS to one thread."""
    import threading

    from meanfield.threads import blas_single_threaded

    with threadpool_limits(limits=2, user_api="blas"):
        if _blas_threads() != 2:
            pytest.skip("no BLAS that can run two threads")
        a_in, a_out, b_in, seen = threading.Event(), threading.Event(), threading.Event(), []

        def first():
            with blas_single_threaded():
                a_in.set()
                b_in.wait(10)
            a_out.set()

        def second():
            a_in.wait(10)
            with blas_single_threaded():
                b_in.set()
                a_out.wait(10)
                seen.append(_blas_threads())
            with blas_single_threaded():         # alone now: this thread sets the limit itself
                seen.append(_blas_threads())
            seen.append(_blas_threads())

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert seen == [1, 1, 2]
        assert _blas_threads() == 2


def _beta_run(beta, t_end=2.0, n=24, saves=5):
    x0 = mf.sampling.uniform_points(n, 3, np.random.default_rng(1))
    sol = solvers.Particles(mf.Model(beta=beta, dim=3)).solve(x0, np.linspace(0.0, t_end, saves), progress=False)
    return float(sol.energy[-1]), default_threads()


def test_tasks_on_threads_equal_the_plain_loop_in_task_order():
    from meanfield.experiments.parallel import map_tasks

    betas = [0.5, 1.0, 2.0, 4.0, 8.0]
    plain = map_tasks(_beta_run, betas, progress=False)
    order = []
    shared = map_tasks(_beta_run, betas, progress=False, threads=2, on_result=lambda i, r: order.append(i),
                       priority=[1, 2, 3, 4, 5])
    assert [e for e, _ in shared] == [e for e, _ in plain]           # bit for bit, in task order
    assert {k for _, k in shared} == {1}                            # each run on one thread of the two
    assert sorted(order) == list(range(5))
    with use_threads(4):                                            # 4 threads, 2 tasks: 2 for each run
        assert [k for _, k in map_tasks(_beta_run, betas[:2], progress=False, threads=None)] == [2, 2]


def _fails_at_two(beta):
    if beta == 2.0:
        raise ValueError("`beta` two is refused here")
    return beta


def test_tasks_on_threads_raise_or_return_failures():
    from meanfield.experiments.parallel import TaskError, map_tasks

    with pytest.raises(ValueError, match="`beta` two"):
        map_tasks(_fails_at_two, [1.0, 2.0, 3.0], progress=False, threads=2)
    out = map_tasks(_fails_at_two, [1.0, 2.0, 3.0], progress=False, threads=2, errors="return")
    assert out[0] == 1.0 and out[2] == 3.0 and isinstance(out[1], TaskError) and "`beta` two" in out[1].message


def test_ctrl_c_stops_the_runs_on_threads_and_keeps_their_saved_times(monkeypatch):
    """Ctrl-C reaches the main thread only: the runs on the task threads stop at their next saved time
    (meanfield.threads.stop_on) and the Interrupted carries every partial Solution. The Ctrl-C comes
    when both running tasks have saved two times (an event, not a fixed wait)."""
    import threading

    from meanfield.experiments.parallel import map_tasks
    from solvers.timestepping import IntegrationResult

    results, ready, record = set(), threading.Event(), IntegrationResult.save

    def save(self, t, y, callback=None, copy=True):
        record(self, t, y, callback, copy)
        if len(self.t) >= 2:
            results.add(id(self))
            if len(results) >= 2:
                ready.set()

    monkeypatch.setattr(IntegrationResult, "save", save)

    def ctrl_c():
        assert ready.wait(timeout=300), "the two runs did not save two times"
        raise KeyboardInterrupt

    with pytest.raises(mf.Interrupted) as info:
        map_tasks(_beta_run, [1.0, 2.0, 3.0], shared={"t_end": 1e5, "n": 64, "saves": 100001}, progress=False, threads=2,
                  meanwhile=ctrl_c)
    partial = info.value.tasks
    assert sorted(partial) == [0, 1]                               # the two running; the third never started
    for sol in partial.values():
        assert 0 < sol.t[-1] < 1e5 and np.all(np.isfinite(sol.energy))
    assert info.value.solution is partial[0]


def test_cli_threads_hold_blas_for_the_whole_command():
    """``--threads 1``: BLAS on one thread outside the runs too (a command's eigenvalues and fits)."""
    seen = []
    _toy("toy-blas", _blas_threads, seen)
    try:
        with threadpool_limits(limits=2, user_api="blas"):
            if _blas_threads() != 2:
                pytest.skip("no BLAS that can run two threads")
            assert main(["toy-blas", "--threads", "1", "--out", "never"]) == 0
            assert main(["toy-blas", "--threads", "2", "--out", "never"]) == 0
            assert seen == [1, 2] and _blas_threads() == 2
    finally:
        EXPERIMENTS.pop("toy-blas")


def test_small_harmonic_transforms_stay_on_one_thread():
    """ducc0 starts its threads at each call: below lmax SHARE_LMAX a transform is faster on one."""
    from meanfield.threads import SHARE_LMAX
    from meanfield.spaces.harmonics import SphericalHarmonicBasis

    assert SphericalHarmonicBasis(16, nthreads=2).nthreads == 1
    assert SphericalHarmonicBasis(SHARE_LMAX - 1, nthreads=2).nthreads == 1
    assert SphericalHarmonicBasis(SHARE_LMAX, nthreads=2).nthreads == 2
    assert solvers.SphericalHarmonics(mf.Model(beta=1.0, dim=3), 31, threads=2).threads == 2   # as asked
    assert mf.representations.harmonics.SphericalHarmonicSeries(31, 2).nthreads == 1
