"""The task engine of the experiments and of ``meanfield sweep``: independent tasks on dask.distributed.

`map_tasks` computes ``[fn(task, **shared) for task in tasks]`` in this process, on a local cluster
of single-threaded worker processes (`cluster`: forked from this process when it runs no other
thread, spawned otherwise), or on a running dask scheduler. The results come back in task order
whatever the order of completion; ``priority`` orders the start of the tasks, ``retries`` re-runs a
task whose worker died or that raised, and ``errors="return"`` turns a failure into a `TaskError`
(what a sweep records for a failed cell, so that the others go on). Ctrl-C cancels the tasks at a
safe point and closes the cluster (docs/sweeps.md).
"""
import contextlib
import importlib.util
import logging
import os
import sys
import time
import traceback
from dataclasses import dataclass
import asyncio
import ctypes
import multiprocessing
import signal
import threading
import warnings

import contextvars
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from ..errors import Interrupted, InvalidInput
from ..threads import check_threads, stop_on, use_threads
from ..validation import check_int
from .report import show_progress
import solvers
from ..transformer.model import Model

# variables that set the thread pools of BLAS, OpenMP, numexpr and numba: one thread per worker
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                    "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS")


def machine_workers():
    """The number of cores this process may use (one worker process per core)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def check_parallel(workers=None, scheduler=None):
    """Validate ``workers`` (None, "auto" or an integer >= 0) and ``scheduler`` (an address or a Client)."""
    if workers is not None and not (isinstance(workers, str) and workers == "auto"):
        workers = check_int(workers, "workers", low=0)
    if scheduler is not None:
        if isinstance(scheduler, str):
            if not scheduler.strip():
                raise InvalidInput("`scheduler` must be an address such as 'tcp://10.0.0.1:8786', got ''.")
        elif not hasattr(scheduler, "submit"):
            raise InvalidInput(f"`scheduler` must be an address such as 'tcp://10.0.0.1:8786' or a "
                             f"distributed.Client, got {type(scheduler).__name__}.")
        if workers not in (None, "auto"):
            raise InvalidInput("give either `workers` (a local cluster) or `scheduler` (an existing cluster), not both.")
    return workers, scheduler


# The event loops' periodic wake-ups, each of which takes the GIL from the task's thread: the tick
# every 20 ms, the system and memory monitors every 0.5 s and 0.1 s. Slower, the phase diagram's
# tasks on 2 workers add up to 19.3-19.6 s instead of 20.3-20.9 s (18.7 s in one process).
_QUIET_MONITORS = {"distributed.admin.tick.interval": "1s", "distributed.admin.system-monitor.interval": "5s",
                   "distributed.worker.memory.monitor-interval": "1s"}
# the dask settings of the local workers, spawned or forked: no statistical profiler, quieter monitors
_WORKER_CONFIG = {"distributed.worker.profile.enabled": False, **_QUIET_MONITORS}


@contextlib.contextmanager
def _worker_environment():
    """How the local workers are spawned: the thread variables set to 1 (one thread per worker); no
    ``MALLOC_TRIM_THRESHOLD_`` (distributed's default, which turns off glibc's adaptive mmap threshold,
    so that every large numpy temporary is mapped and zeroed again: 5x the system time of a particle
    run); no statistical profiler in the workers; the slower monitors of `_QUIET_MONITORS`."""
    import dask  # deferred: dask is heavy

    saved = {k: os.environ.get(k) for k in THREAD_VARIABLES}
    os.environ.update({k: "1" for k in THREAD_VARIABLES})      # distributed lets the environment win
    environ = {k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
               if k != "MALLOC_TRIM_THRESHOLD_"}
    environ.update({k: 1 for k in THREAD_VARIABLES})
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": environ, **_WORKER_CONFIG}):
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _dashboard(client):
    if importlib.util.find_spec("bokeh") is None:
        return "not available (install bokeh for the dashboard)"
    return client.dashboard_link


def log_to_stderr(text):
    print(text, file=sys.stderr, flush=True)


@contextlib.contextmanager
def cluster(workers=None, scheduler=None, log=log_to_stderr):
    """A `distributed.Client` for ``map_tasks``, or None (serial: ``workers`` None or 0 and no scheduler).

    ``workers=N`` starts a `LocalCluster` of N worker processes with one thread each (BLAS/OpenMP
    pinned to one thread); ``"auto"``: one per core. When this process runs no other thread, the
    workers are forked from it (`_ForkedWorkers`: up in ~0.15 s with this process's imports, and
    warmed up while the scheduler starts); otherwise dask's nannies spawn them (~1 s).
    ``scheduler``: the address of a running dask scheduler (``tcp://host:8786``), or a `Client`, used
    as it is. The dashboard address is logged.
    """
    workers, scheduler = check_parallel(workers, scheduler)
    if scheduler is None and not workers:
        yield None
        return
    log = log or (lambda text: None)
    if scheduler is not None and not isinstance(scheduler, str):
        yield scheduler
        return
    if scheduler is not None:
        from distributed import Client  # deferred: dask is heavy

        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise InvalidInput(f"`scheduler`: cannot connect to {scheduler!r} ({exc}).") from None
        with client:
            n = len(client.scheduler_info().get("workers", {}))
            log(f"dask: connected to {scheduler} ({n} workers); dashboard {_dashboard(client)}")
            yield client
        return
    n = machine_workers() if workers == "auto" else workers
    forked = None
    try:
        from distributed import Client, LocalCluster      # imported once here (no thread yet), for the forks too

        forked = _ForkedWorkers.start(n)          # before the scheduler's event loop starts its thread

        with _worker_environment():
            # the scheduler (its dashboard on a free port: 8787 may be taken) and, unless forked, n spawned workers
            local = LocalCluster(n_workers=0 if forked else n, threads_per_worker=1, processes=True,
                                 silence_logs=logging.ERROR, dashboard_address=":0")
        with local, Client(local) as client:
            how = "spawned"
            if forked:                            # they join while the caller goes on (tasks wait for them)
                forked.connect(local.scheduler_address, client)
                how = "forked from this process"
            log(f"dask: LocalCluster of {n} worker processes x 1 thread ({how}); dashboard {_dashboard(client)}")
            yield client
    finally:
        if forked:
            forked.close()


def _forked_worker(conn, log_level):
    """A forked worker process: waits for the scheduler's address, then runs one single-threaded dask
    Worker until the scheduler closes. Ctrl-C is left to the parent (which cancels and closes)."""

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:                                          # Linux: SIGTERM when the parent dies, not an orphan

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)          # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    os.environ.update({k: "1" for k in THREAD_VARIABLES})          # one thread (read by numba and the sums)

    import dask  # deferred: dask is heavy
    from distributed import Worker  # deferred: dask is heavy

    dask.config.set(_WORKER_CONFIG)               # as the spawned workers of `_worker_environment`
    _warm_up()
    try:
        address = conn.recv()
    except EOFError:                              # the parent closed the pipe without an address
        address = None
    conn.close()
    if address is None:
        return
    logging.getLogger("distributed").setLevel(log_level)

    async def run():
        async with Worker(address, nthreads=1, death_timeout=30) as worker:
            await worker.finished()

    with threadpool_limits(1):                    # BLAS inherited from the parent: one thread here
        asyncio.run(run())


def _warm_up():
    """What a worker's first task would otherwise pay (0.2-0.4 s), done while the parent starts the
    scheduler: the solvers imported, and numba's compiled loops loaded from its cache by their first
    calls, in a tiny adaptive particle run with the cluster diagnostics (those of the phase diagram)."""
    try:


        x = np.broadcast_to(np.eye(3), (2, 3, 3)).copy()
        solvers.Particles(Model(beta=1.0, dim=3), diagnostics=("clustered_fraction", "clusters")).solve(
            x, [0.0, 0.1], save="diagnostics", progress=False)
    except Exception:                             # pragma: no cover - a warm-up never stops a worker
        pass


class _ForkedWorkers:
    """The processes of a local cluster forked from this process instead of spawned: they inherit its
    imports (numpy, scipy, numba, distributed, meanfield), so they are up in ~0.15 s instead of ~1 s
    each (docs/sweeps.md). Only while this process runs no other thread: `start` returns None when it
    has Python threads, or when CPython warns that the fork happened in a multi-threaded process
    (its DeprecationWarning; the children, which have done nothing but wait, are then killed and
    the cluster spawns its workers). Without a nanny, a worker that dies is not replaced: its tasks
    are retried on the others, and `alive` tells the wait loop when none is left."""

    def __init__(self, processes, pipes):
        self.processes, self.pipes, self.key = processes, pipes, None

    @classmethod
    def start(cls, n):
        if not hasattr(os, "fork") or sys.platform != "linux" or threading.active_count() != 1:
            return None
        ctx = multiprocessing.get_context("fork")
        processes, pipes = [], []
        level = logging.getLogger("distributed").getEffectiveLevel()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DeprecationWarning)
            for _ in range(n):
                ours, theirs = ctx.Pipe()
                proc = ctx.Process(target=_forked_worker, args=(theirs, max(level, logging.ERROR)), daemon=True,
                                   name="meanfield-dask-worker")
                proc.start()
                theirs.close()
                processes.append(proc)
                pipes.append(ours)
        if any("multi-threaded" in str(w.message) for w in caught):
            for proc in processes:
                proc.kill()
                proc.join()
            return None
        return cls(processes, pipes)

    def connect(self, address, client):
        """Send the scheduler's address; the workers join when ready (a dead one is seen by `alive`)."""
        for pipe in self.pipes:
            pipe.send(address)
        self.key = id(client)
        FORKED[self.key] = self

    def alive(self):
        return sum(proc.is_alive() for proc in self.processes)

    def close(self, timeout=10):
        for pipe in self.pipes:
            try:
                pipe.send(None)                   # the ones still waiting for an address
            except OSError:
                pass
            pipe.close()
        for proc in self.processes:
            proc.join(timeout)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout)
        FORKED.pop(self.key, None)


FORKED = {}                                      # id(client) -> its _ForkedWorkers


@dataclass
class TaskError:
    """A task that raised: the exception's type, message and traceback (``errors="return"``)."""

    type: str
    message: str
    traceback: str = ""

    @classmethod
    def from_exception(cls, exc):
        return cls(type(exc).__name__, str(exc), "".join(traceback.format_exception(exc)))

    def __str__(self):
        return f"{self.type}: {self.message}"


def _apply(fn, task, shared):
    return fn(task, **shared)


def _identity(value):
    return value


def map_tasks(fn, tasks, *, workers=None, scheduler=None, shared=None, progress=None, desc=None, retries=2,
              errors="raise", on_result=None, priority=None, log=log_to_stderr, threads=1, meanwhile=None):
    """``[fn(task, **shared) for task in tasks]``, spread over dask workers or threads; results in task order.

    Parameters
    ----------
    fn : a module-level function (it is pickled to the workers).
    tasks : the independent parts (β values, seeds, N, cells); each is passed to ``fn`` as it is.
    workers, scheduler : see `cluster`. Without them (or ``workers=0``) the tasks run here: one after
        the other, exactly as a plain loop, or on ``threads``.
    threads : threads of this process that share the tasks when no dask worker does (None:
        `meanfield.threads.default_threads`; default 1, the plain loop). With more than one, and more
        than one task, each task runs on one of them with ``threads`` split among the running tasks
        (``use_threads``), so that ``fn`` must be safe to run beside itself (solver runs are). Ctrl-C
        stops the running tasks at their next step (`meanfield.threads.stop_on`); `Interrupted` then
        carries ``tasks``, {index: partial Solution} of every task it stopped.
    meanwhile : a function called once here while the tasks run on threads or workers (imports that the
        results' writing needs, say); not called when the tasks run in the plain loop.
    shared : keyword arguments common to every task, sent once (large arrays) rather than with each task.
    progress : a bar over the completed tasks (None: when stderr is a terminal); ``desc`` its label.
    retries : re-runs of a task that raised (a task whose worker died is re-run by the scheduler).
    errors : "raise" (the first failure propagates) or "return" (a failed task's result is a `TaskError`).
    on_result : ``on_result(index, result)`` called in this process as each task completes (any order).
    priority : on workers, a number per task: the larger start first (default: in list order). Give the
        longest tasks the largest, so that the short ones fill the end. It changes no result. The dask
        scheduler follows it as a rule, not strictly (a late worker lets the other run ahead).
    """
    tasks = list(tasks)
    try:
        priority = np.arange(len(tasks), 0, -1.0) if priority is None else np.asarray(priority, dtype=float)
    except (TypeError, ValueError):                # not numbers
        priority = np.empty(0)
    if priority.shape != (len(tasks),) or not np.all(np.isfinite(priority)):
        raise InvalidInput(f"`priority` must hold one finite number per task ({len(tasks)} tasks).")
    shared = dict(shared or {})
    if errors not in ("raise", "return"):
        raise InvalidInput(f"`errors` must be 'raise' or 'return', got {errors!r}.")
    retries = check_int(retries, "retries", low=0)
    results = [None] * len(tasks)
    bar = None

    def done(i, result):
        results[i] = result
        if on_result is not None:
            on_result(i, result)
        if bar is not None:
            bar.update(1)

    try:
        with cluster(workers, scheduler, log) as client:
            if show_progress(progress) and tasks:    # after the start: tqdm's monitor is a thread (no fork then)

                bar = tqdm(total=len(tasks), desc=desc, unit="task")
            threads = check_threads(threads) if client is None else 1
            if client is None and (threads == 1 or len(tasks) < 2):
                for i, task in enumerate(tasks):
                    try:
                        result = fn(task, **shared)
                    except Interrupted as exc:
                        exc.tasks = {i: exc.solution}
                        raise
                    except Exception as exc:
                        if errors == "raise":
                            raise
                        result = TaskError.from_exception(exc)
                    done(i, result)
            elif client is None:
                _run_threads(fn, tasks, shared, threads, errors, done, priority, meanwhile)
            elif tasks:
                _run_distributed(client, fn, tasks, shared, retries, errors, done, priority, meanwhile)
    finally:
        if bar is not None:
            bar.close()
    return results


@contextlib.contextmanager
def _deferred_interrupt():
    """Ctrl-C (SIGINT) sets the yielded event instead of raising KeyboardInterrupt wherever the main
    thread happens to be: inside distributed's client calls, an interrupt leaves its event loop in a
    state where closing the cluster can hang. The caller raises at a safe point. Outside the main
    thread the handler cannot be changed and the event is never set."""

    flag = threading.Event()
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: flag.set())
    except ValueError:                            # not the main thread
        yield flag
        return
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _uninterrupted(meanwhile):
    """``meanwhile()`` with a Ctrl-C that lands during it held back until it returns: interrupted imports
    would leave their modules half made (a broken pyplot, and no picture of the partial results)."""
    if threading.current_thread() is not threading.main_thread():
        meanwhile()
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        meanwhile()
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _run_threads(fn, tasks, shared, threads, errors, done, priority, meanwhile):
    """The tasks on ``threads`` threads of this process, the larger ``priority`` first, ``done`` called
    here as each ends. Ctrl-C (or a failure under ``errors="raise"``) cancels the tasks not started and
    stops the running ones at their next step; their partial Solutions go with the `Interrupted`."""
    running = min(threads, len(tasks))
    stop = threading.Event()

    def run(i):
        with use_threads(max(1, threads // running)), stop_on(stop):
            return fn(tasks[i], **shared)

    pool = ThreadPoolExecutor(running, thread_name_prefix="meanfield-task")
    futures = {pool.submit(contextvars.copy_context().run, run, i): i
               for i in sorted(range(len(tasks)), key=lambda i: -priority[i])}
    collected, stopped = set(), {}

    def collect(fut):
        """done(i, result) for a task that ended; the exception that ends the map, if it is one."""
        collected.add(fut)
        if fut.cancelled():
            return None
        i, exc = futures[fut], fut.exception()
        if exc is None:
            done(i, fut.result())
        elif isinstance(exc, Interrupted):
            stopped[i] = exc
            return exc
        elif errors == "raise":
            return exc
        else:
            done(i, TaskError.from_exception(exc))
        return None

    failure = None
    try:
        if meanwhile is not None:
            _uninterrupted(meanwhile)
        pending = set(futures)
        while pending and failure is None:
            finished, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            for fut in sorted(finished, key=futures.get):
                failure = failure or collect(fut)
    except KeyboardInterrupt:
        failure = KeyboardInterrupt()
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
    for fut in sorted(set(futures) - collected, key=futures.get):     # those that ended while stopping
        collect(fut)
    if failure is None:
        return
    if isinstance(failure, (KeyboardInterrupt, Interrupted)) and stopped:
        failure = stopped[min(stopped)]
        failure.tasks = {i: exc.solution for i, exc in sorted(stopped.items())}
    raise failure


def _run_distributed(client, fn, tasks, shared, retries, errors, done, priority, meanwhile=None):
    import dask  # deferred: dask is heavy
    from distributed import as_completed  # deferred: dask is heavy

    with _deferred_interrupt() as interrupted:
        # one graph, sent at once, so that the priorities order all the tasks: they wait for the shared
        # arguments (one task, not scattered data: a worker that dies with them is recomputed), then
        # start by priority (submitted one by one, the first could start before the last is known)
        sent = dask.delayed(_identity, pure=False)(shared) if shared else {}
        graph = []
        for task, p in zip(tasks, priority):
            with dask.annotate(priority=float(p)):
                graph.append(dask.delayed(_apply, pure=False)(fn, task, sent))
        futures = client.compute(graph, retries=retries, optimize_graph=False)
        index = {f.key: i for i, f in enumerate(futures)}
        pending = as_completed(futures)
        forked = FORKED.get(id(client))
        if meanwhile is not None:
            _uninterrupted(meanwhile)

        def safe_point():                         # Ctrl-C is raised here, between two client calls
            if interrupted.is_set():
                raise KeyboardInterrupt

        try:
            while not pending.is_empty():
                safe_point()
                if not pending.has_ready():
                    if forked is not None and not forked.alive():
                        raise RuntimeError(f"all {len(forked.processes)} worker processes of the local cluster died "
                                           f"(exit codes {[p.exitcode for p in forked.processes]}); "
                                           f"{sum(not f.done() for f in futures)} tasks were not computed.")
                    time.sleep(0.02)
                    continue
                for fut in pending.next_batch(block=False):
                    safe_point()                  # also between the results of one batch (each is recorded)
                    try:
                        result = fut.result()
                    except Exception as exc:
                        if errors == "raise":
                            raise
                        result = TaskError.from_exception(exc)
                    fut.release()
                    done(index[fut.key], result)
            safe_point()                          # a Ctrl-C during the last results is not lost
        except BaseException:
            client.cancel(futures)
            raise
