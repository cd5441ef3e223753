"""Sweeps on dask.distributed: identical to the serial run, worker deaths retried, Ctrl-C resumable."""
import dataclasses
import importlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import meanfield as mf
from meanfield.cli import main
sw = importlib.import_module("meanfield.experiments.sweep")
par = importlib.import_module("meanfield.experiments.parallel")
ROOT = pathlib.Path(__file__).resolve().parents[1]

# a run cell takes ~0.1-0.3 s: the Fourier solver with 32 modes, repulsive, so it never under-resolves
CIRCLE = """
[solver]
name = "fourier"
modes = 32
rtol = 1e-12
atol = 1e-14

[model]
beta = 1.0
dim = 2
V = -1.0

[initial]
density = "perturbed_uniform"
amplitude = 0.1
degree = 3

[times]
t_end = {t_end}
n_saves = 5
"""


def _write(path, text):
    path.write_text(text)
    return path


def _summary(out):
    return json.loads((pathlib.Path(out) / "summary.json").read_text())


def _done_cells(out):
    """Cells whose status file (the completion marker) says done."""
    return sorted(int(p.stem[5:]) for p in (pathlib.Path(out) / "cells").glob("cell-*.json")
                  if json.loads(p.read_text())["status"] == "done")


def _assert_identical(a, b):
    assert set(a.variables) == set(b.variables) and dict(a.sizes) == dict(b.sizes)
    for name in a.variables:
        assert np.array_equal(a[name].values, b[name].values, equal_nan=True), name


@pytest.fixture(scope="module")
def client():
    """One LocalCluster of 2 worker processes (1 thread each) for the whole module."""
    with par.cluster(workers=2, log=None) as c:
        yield c


# tasks for map_tasks: module level, so the workers import them
def _die_once(i, *, marker):
    """Task 2 kills its own worker process the first time it runs."""
    if i == 2 and not os.path.exists(marker):
        pathlib.Path(marker).write_text("killed")
        os._exit(1)
    return i * i


def _square(i):
    return i * i


def _raise_once(i, *, marker):
    if i == 1 and not os.path.exists(marker):
        pathlib.Path(marker).write_text("raised")
        raise RuntimeError("first attempt fails")
    return -i


def test_cell_seeds_are_spawned_from_the_sweep_seed():
    """Cell i's seed is the i-th child of SeedSequence(seed): independent of workers and order."""
    children = np.random.SeedSequence(7).spawn(5)
    assert [sw.cell_seed(7, i) for i in range(5)] == [int(c.generate_state(1, np.uint32)[0]) for c in children]
    assert len({sw.cell_seed(7, i) for i in range(100)}) == 100
    with pytest.raises(ValueError, match=r"`seed`"):
        sw.cell_seed(-1, 0)


PARTICLES = {"sweep": {"seed": 5, "replicas": 2, "grid": {"model.beta": [1.0, 4.0]}},
             "solver": {"name": "particles", "n": 24, "rtol": 1e-7},
             "model": {"beta": 1.0, "dim": 3},
             "initial": {"density": "uniform"},
             "times": {"t_end": 2.0, "n_saves": 5}}


def test_sweep_on_two_workers_equals_serial(client, tmp_path):
    serial = sw.sweep(PARTICLES, tmp_path / "serial", workers=0, progress=False, log=None)
    spread = sw.sweep(PARTICLES, tmp_path / "dask", scheduler=client, progress=False, log=None)
    assert serial.passed and spread.passed
    assert spread.results["computed"] == 4 and spread.results["failed"] == 0
    a, b = sw.open_sweep(tmp_path / "serial"), sw.open_sweep(tmp_path / "dask")
    assert a["positions"].chunks is not None                      # opened lazily with dask
    assert a["positions"].dims[:3] == ("beta", "replica", "time")
    assert a.sizes["beta"] == 2 and a.sizes["replica"] == 2 and a.sizes["particle"] == 24
    _assert_identical(a.load(), b.load())
    # cell i (beta-major, replica last) starts from iid points drawn with its spawned seed
    for i, (beta, r) in enumerate([(1.0, 0), (1.0, 1), (4.0, 0), (4.0, 1)]):
        seed = json.loads((tmp_path / "dask" / "cells" / f"cell-{i:05d}.json").read_text())["seed"]
        assert seed == sw.cell_seed(5, i)
        x0, _ = mf.sampling.sample(mf.densities.uniform(), 24, 3, rng=seed)
        assert np.array_equal(a["positions"].sel(beta=beta, replica=r).isel(time=0).values, x0)
    assert not np.allclose(a["positions"].isel(replica=0, time=0), a["positions"].isel(replica=1, time=0))


def test_experiments_on_two_workers_equal_serial(client):
    """Phase diagram (one task per β) and W1 against N (one task per sample) on the cluster."""
    from meanfield.experiments import phase_diagram

    mfl = importlib.import_module("meanfield.experiments.mean_field_limit")

    kw = dict(betas=[1.0, 3.0, 6.0], realisations=6, n=6, t_end=4.0, n_times=5, progress=False)
    a = phase_diagram(None, **kw)
    b = phase_diagram(None, scheduler=client, **kw)
    assert np.array_equal(a.results["p"], b.results["p"])
    assert np.array_equal(a.results["mean_clusters_final"], b.results["mean_clusters_final"], equal_nan=True)
    assert 0 < a.results["p"][-1, -1] < 1
    model = mf.Model(beta=1.0, dim=2)
    rho0 = mf.densities.von_mises_fisher([0.0, 1.0], 2.0)
    args = (2, model, rho0, [0.0, 0.5], [40, 120], ("iid", "quasi"), 2, 200)
    w_serial, _, _ = mfl.sampling_study(*args, coarse=True)
    w_dask, _, _ = mfl.sampling_study(*args, coarse=True, scheduler=client)
    for method in ("iid", "quasi"):
        assert np.isfinite(w_serial[method]).all()
        assert np.array_equal(w_serial[method], w_dask[method])


def _identity_task(i, *, pad):
    return i


class _SentOrder:
    """A scheduler plugin: the ``priority`` annotation of each task, in the order the scheduler sends
    the tasks to the workers (their transition to "processing")."""

    def __init__(self, scheduler):
        self.scheduler, self.sent = scheduler, []

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "processing" and str(key).startswith("_apply"):     # never raises in the scheduler
            task = self.scheduler.tasks.get(key)
            self.sent.append(None if task is None else (task.annotations or {}).get("priority"))


def test_tasks_start_in_the_order_of_their_priority(client):
    """On workers the tasks start in list order, or by ``priority`` (the larger first: the phase diagram
    puts its longest tasks first). What ``map_tasks`` promises is that each task reaches the scheduler
    with its priority, and the scheduler sends the ready tasks to the workers in that order: both are
    read on the scheduler (a plugin), not from clocks, so a loaded or a fast machine gives the same
    answer. The results stay in task order."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    recorder = type("Recorder", (_SentOrder, SchedulerPlugin), {})(client.cluster.scheduler)
    client.cluster.scheduler.add_plugin(recorder, name="sent-order")
    shared = {"pad": np.zeros(1000)}
    priority = np.arange(12) % 3                                                     # 2, 5, 8, 11 first
    try:
        for given, expected in ((None, np.arange(12, 0, -1.0)), (list(priority), priority)):
            recorder.sent.clear()
            out = par.map_tasks(_identity_task, range(12), scheduler=client, shared=shared, progress=False,
                                priority=given)
            assert out == list(range(12))
            assert sorted(recorder.sent) == sorted(expected)                       # every task's own priority
            assert recorder.sent == sorted(recorder.sent, reverse=True)            # sent the larger first
    finally:
        client.cluster.scheduler.remove_plugin(name="sent-order")
    for bad in ([1.0] * 11, [1.0] * 11 + [np.nan], ["high"] * 12, 3.0, list(range(100))):
        with pytest.raises(ValueError, match="`priority` must hold one finite number per task"):
            par.map_tasks(_square, range(12), priority=bad)


@dataclasses.dataclass
class _Task:
    a: int
    b: list = dataclasses.field(default_factory=list)
    c: int = dataclasses.field(init=False, default=7)


def _repr(task):
    return repr(task)


def test_tasks_reach_the_function_as_they_are(client):
    """The tasks travel inside one dask graph: a tuple that starts with a function, a dict of such
    tuples, a dataclass with a field outside __init__, must arrive unchanged, not be run as tasks
    or rebuilt."""
    task = _Task(1, [2])
    task.c = 99
    tasks = [(len, "abc"), {"k": (sum, [1, 2])}, task, [len, 1]]
    expected = [repr(t) for t in tasks]
    assert par.map_tasks(_repr, tasks, progress=False) == expected
    assert par.map_tasks(_repr, tasks, scheduler=client, progress=False) == expected


def test_killed_worker_does_not_lose_a_task(client, tmp_path):
    marker = tmp_path / "killed"
    out = par.map_tasks(_die_once, range(6), scheduler=client, shared={"marker": str(marker)}, progress=False)
    assert marker.read_text() == "killed"                          # the worker did die
    assert out == [i * i for i in range(6)]
    # a task that raises is retried too (retries=), or reported with errors="return"
    marker = tmp_path / "raised"
    assert par.map_tasks(_raise_once, range(3), scheduler=client, shared={"marker": str(marker)},
                        retries=1, progress=False) == [0, -1, -2]
    marker.unlink()
    out = par.map_tasks(_raise_once, range(3), scheduler=client, shared={"marker": str(marker)}, retries=0,
                       errors="return", progress=False)
    assert out[0] == 0 and out[2] == -2
    assert isinstance(out[1], par.TaskError) and "first attempt fails" in str(out[1])


def test_failing_cell_is_recorded_and_counted(client, tmp_path, capsys):
    """β = 400 is not resolved by 16 modes: that cell fails, the others finish; exit status 1."""
    spec = _write(tmp_path / "fail.toml", CIRCLE.format(t_end=1.0).replace("modes = 32", "modes = 16")
                  + '\n[sweep.grid]\n"model.beta" = [0.5, 400.0, 1.0]\n')
    out = tmp_path / "out"
    address = client.scheduler.address
    assert main(["sweep", str(spec), "--out", str(out), "--scheduler", address, "--no-progress"]) == 1
    text = capsys.readouterr().out
    assert "1 of 3 cells failed" in text
    s = _summary(out)
    assert (s["results"]["computed"], s["results"]["failed"], s["results"]["skipped"]) == (3, 1, 0)
    assert s["results"]["failed_cells"][0]["index"] == 1 and "modes`" in s["results"]["failed_cells"][0]["error"]
    status = json.loads((out / "cells" / "cell-00001.json").read_text())
    assert status["status"] == "failed" and "modes`" in status["error"]
    ds = sw.open_sweep(out).load()
    assert np.isnan(ds["energy"].sel(beta=400.0)).all() and np.isfinite(ds["energy"].sel(beta=1.0)).all()
    # again, serially: only the failed cell runs (and fails again)
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "0", "--no-progress"]) == 1
    s = _summary(out)
    assert (s["results"]["computed"], s["results"]["failed"], s["results"]["skipped"]) == (1, 1, 2)


def test_sigint_then_resume_computes_only_the_missing_cells(client, tmp_path):
    spec = _write(tmp_path / "ctrlc.toml", CIRCLE.format(t_end=2.0)
                  + '\n[sweep.grid]\n"model.beta" = [0.5, 1.0, 2.0, 3.0, 4.0, 5.0]\n'
                  + '"initial.amplitude" = [0.05, 0.1]\n')
    out = tmp_path / "out"
    args = ["sweep", str(spec), "--out", str(out), "--workers", "2", "--no-progress"]
    # SIGINT right after the third cell is written (tests/signal_driver.py), never after a fixed time
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "signal_driver.py"), "INT", "cells", "3", "--",
                             *args], preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert _summary(out)["status"] == "interrupted", err
    done = _done_cells(out)
    assert 3 <= len(done) < 12, (done, err)
    # restart (on the module's cluster): the complete cells are skipped, the missing ones computed
    assert main(args[:4] + ["--scheduler", client.scheduler.address, "--no-progress"]) == 0
    s = _summary(out)
    assert s["status"] == "finished" and s["results"]["cells"] == 12
    assert s["results"]["skipped"] == len(done) and s["results"]["computed"] == 12 - len(done), (done, s)
    assert _done_cells(out) == list(range(12))
    ds = sw.open_sweep(out)
    assert dict(ds["energy"].sizes) == {"beta": 6, "amplitude": 2, "time": 5}
    assert np.isfinite(ds["energy"].values).all()


def test_resume_recomputes_corrupt_and_changed_cells(tmp_path):
    """A truncated NetCDF file, or a changed configuration, is not a complete cell."""
    spec = _write(tmp_path / "list.toml", CIRCLE.format(t_end=1.0)
                  + '\n[[sweep.cells]]\n"model.beta" = 0.5\n"model.V" = -1.0\n'
                  + '\n[[sweep.cells]]\n"model.beta" = 2.0\n"model.V" = 1.0\n')
    out = tmp_path / "out"
    kw = dict(workers=0, progress=False, log=None)
    assert sw.sweep(spec, out, **kw).results["computed"] == 2
    ds = sw.open_sweep(out)
    assert ds.sizes["cell"] == 2 and list(ds["beta"].values) == [0.5, 2.0] and list(ds["V"].values) == [-1.0, 1.0]
    ds.close()
    nc = out / "cells" / "cell-00001.nc"
    nc.write_bytes(nc.read_bytes()[:200])
    r = sw.sweep(spec, out, **kw).results
    assert (r["computed"], r["skipped"]) == (1, 1)
    spec.write_text(spec.read_text().replace("t_end = 1.0", "t_end = 0.5"))
    r = sw.sweep(spec, out, **kw).results
    assert (r["computed"], r["skipped"]) == (2, 0)
    assert sw.open_sweep(out)["time"].values[-1] == 0.5


@pytest.mark.parametrize("edit, key", [
    (("[sweep.grid]", "[sweep]\ngird = 1\n[sweep.grid]"), "`sweep.gird`"),
    (('"model.beta"', '"model.betta"'), "`model.betta`"),
    (("[sweep.grid]\n", "[sweep.grid]\n\"solver.modes\" = 64\n"), "`sweep.grid.solver.modes`"),
    (("[times]", "[timez]\nx = 1\n[times]"), "`[timez]`"),
])
def test_bad_sweep_file_exits_2_naming_the_key(tmp_path, capsys, edit, key):
    text = CIRCLE.format(t_end=1.0) + '\n[sweep.grid]\n"model.beta" = [0.5, 1.0]\n'
    spec = _write(tmp_path / "bad.toml", text.replace(*edit))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "0"]) == 2
    assert key in capsys.readouterr().err
    assert not (tmp_path / "out").exists()                          # nothing ran, nothing written


def test_bad_experiment_sweeps_and_arguments(tmp_path, capsys):
    base = '[sweep]\nexperiment = "phase-diagram"\n[sweep.grid]\ndim = [2, 3]\n[parameters]\nrealisations = 4\n'
    for text, key in [(base.replace("dim = [2, 3]", "dims = [2, 3]"), "`sweep.grid.dims`"),
                      (base + "foo = 1\n", "`parameters.foo`"),
                      (base.replace("phase-diagram", "phase-diagramm"), "`sweep.experiment`"),
                      (base.replace("dim = [2, 3]", "dim = [2, 2]"), "`sweep.grid.dim`"),
                      (base + "workers = 2\n", "`parameters.workers`")]:
        with pytest.raises(ValueError, match=key):
            sw.parse_sweep(__import__("tomllib").loads(text))
    spec = _write(tmp_path / "pd.toml", base)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers", "-1"]) == 2
    assert "`workers`" in capsys.readouterr().err
    assert main(["phase-diagram", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1", "--out", str(tmp_path)]) == 2
    assert "`scheduler`" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"`errors`"):
        par.map_tasks(abs, [1], errors="ignore")


@pytest.mark.slow
def test_metastability_and_noise_transition_on_two_workers_equal_serial(client, tmp_path):
    """The two experiments whose runs come in several batches: on one cluster (every batch on it), the
    same numbers as in one process."""
    from meanfield.experiments import metastability, noise_transition

    kw = dict(dims=(2,), betas_circle=(8.0,), seeds=1, t_end=24.0, quasi_ns=(64,), iid_ns=(16,), iid_seeds=2,
              iid_betas=(8.0,), iid_t_end=5.0, figure4_betas=(8.0,), figure4_n=16, figure4_seeds=2,
              staircase_seeds=(0,), staircase_t_end=5.0, progress=False)
    a = metastability(tmp_path / "serial", **kw).results
    b = metastability(tmp_path / "dask", scheduler=client, **kw).results
    assert a["continuum"]["S1_beta8"]["first_count"] == [4.0]
    for key in ("continuum", "particles_quasi", "figure4"):
        _assert_same(a[key], b[key])
    kw = dict(dims=(2,), factors=(0.5,), sa=False, quick=True, n_particles=60, tau=5.0, progress=False)
    a = noise_transition(tmp_path / "nt-serial", **kw).results["d2"]
    b = noise_transition(tmp_path / "nt-dask", scheduler=client, **kw).results["d2"]
    (key, ra), = a["beta"].items()
    rb = b["beta"][key]
    assert len(ra["runs"]) > 0
    _assert_same(ra, rb)


def _assert_same(a, b, path="results"):
    """Equal element for element, through nested dicts and lists (NaN equal to NaN); wall times aside."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in set(a) - {"wall_time"}:
            _assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)) and not all(np.isscalar(v) for v in a):
        assert len(a) == len(b), path
        for i, (u, v) in enumerate(zip(a, b)):
            _assert_same(u, v, f"{path}[{i}]")
    else:
        x, y = np.asarray(a), np.asarray(b)
        assert x.shape == y.shape and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), (path, x, y)


def test_ctrl_c_during_distributed_waits_for_a_safe_point():
    """While tasks run on dask, SIGINT sets a flag (the wait loop raises KeyboardInterrupt between
    client calls, so closing the cluster cannot hang); the previous handler comes back afterwards."""
    before = signal.getsignal(signal.SIGINT)
    with par._deferred_interrupt() as interrupted:
        assert not interrupted.is_set()
        os.kill(os.getpid(), signal.SIGINT)     # the handler runs in this thread before os.kill returns
        assert interrupted.is_set()
    assert signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_while_the_last_results_are_recorded_is_not_lost(client):
    """A Ctrl-C that arrives while the results are recorded (a sweep writes each cell's files then)
    stops the run at the next result, or after the last one: it is never swallowed."""
    recorded = []

    def record(i, result):
        recorded.append(i)
        if len(recorded) == 2:
            os.kill(os.getpid(), signal.SIGINT)            # from the main thread: the flag is set at once

    with pytest.raises(KeyboardInterrupt):
        par.map_tasks(_square, range(2), scheduler=client, progress=False, on_result=record)
    assert len(recorded) == 2


# -- local workers forked from a single-threaded process -------------------------------------------------
FORKED = r'''
import json, os, pathlib, sys, threading, time
import meanfield.experiments.parallel as par

mode, tmp = (sys.argv[1], pathlib.Path(sys.argv[2])) if len(sys.argv) > 2 else (None, None)


def square_and_parent(i):
    return [i * i, os.getppid()]


def die_once(i):
    marker = tmp / "killed"
    if i == 2 and not marker.exists():
        marker.write_text("killed")
        os._exit(1)
    return [i * i, os.getppid()]


def always_die(i):
    os._exit(3)


def hang(i):
    (tmp / f"worker-{os.getpid()}").write_text(str(os.getppid()))
    time.sleep(600)


if __name__ == "__main__":
    if mode == "threaded":                       # another Python thread: no fork, spawned workers
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
    logs = []
    fn = {"plain": square_and_parent, "threaded": square_and_parent, "die_once": die_once, "all_die": always_die,
          "hang": hang}[mode]
    try:
        out = par.map_tasks(fn, range(6), workers=2, progress=False, log=logs.append)
        error = None
    except RuntimeError as exc:
        out, error = None, str(exc)
    print(json.dumps({"out": out, "pid": os.getpid(), "log": logs, "error": error}))
'''


def _forked_run(tmp_path, mode):
    script = _write(tmp_path / "forked.py", FORKED)
    env = {**os.environ, **{k: "1" for k in par.THREAD_VARIABLES}}
    proc = subprocess.run([sys.executable, str(script), mode, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_local_workers_are_forked_from_a_single_threaded_process(tmp_path):
    """The workers are children of this process (forked, not spawned by nannies), compute every task,
    and a worker that dies mid-task loses nothing: the task is retried on the other one."""
    res = _forked_run(tmp_path, "plain")
    assert "forked from this process" in res["log"][0]
    assert [r[0] for r in res["out"]] == [i * i for i in range(6)]
    assert {r[1] for r in res["out"]} == {res["pid"]}
    res = _forked_run(tmp_path, "die_once")
    assert (tmp_path / "killed").read_text() == "killed"
    assert [r[0] for r in res["out"]] == [i * i for i in range(6)] and "forked" in res["log"][0]


def _gone(pid):
    """The process has exited (a zombie counts: nobody may be left to reap it in a container)."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_killed_run_leaves_no_worker_behind(tmp_path):
    """SIGKILL to the process that started the local cluster: the kernel sends its forked workers
    SIGTERM (PR_SET_PDEATHSIG), and they exit although each is inside a long task."""
    script = _write(tmp_path / "forked.py", FORKED)
    env = {**os.environ, **{k: "1" for k in par.THREAD_VARIABLES}}
    proc = subprocess.Popen([sys.executable, str(script), "hang", str(tmp_path)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while sum(1 for p in tmp_path.glob("worker-*") if p.read_text()) < 2:     # written, not only created
            assert time.monotonic() < deadline and proc.poll() is None, "the workers did not start"
            time.sleep(0.05)
        workers = [int(p.name[7:]) for p in tmp_path.glob("worker-*")]
        assert {int(p.read_text()) for p in tmp_path.glob("worker-*")} == {proc.pid}
        assert not any(_gone(pid) for pid in workers)
    finally:
        proc.kill()
        proc.wait()
    try:
        deadline = time.monotonic() + 20
        while not all(_gone(pid) for pid in workers):
            assert time.monotonic() < deadline, "a worker outlived the killed run"
            time.sleep(0.05)
    finally:
        for pid in workers:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_forked_workers_all_dead_is_an_error_not_a_hang(tmp_path):
    res = _forked_run(tmp_path, "all_die")
    assert res["out"] is None
    assert "all 2 worker processes of the local cluster died" in res["error"] and "tasks were not computed" in res["error"]


def test_a_process_with_threads_spawns_its_workers(tmp_path):
    """Forking a process that runs other threads may deadlock the children: those workers are spawned."""
    res = _forked_run(tmp_path, "threaded")
    assert "spawned" in res["log"][0]
    assert [r[0] for r in res["out"]] == [i * i for i in range(6)]
