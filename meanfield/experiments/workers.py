"""The local cluster of the experiments' tasks (`meanfield.experiments.parallel.map_tasks` runs on it).

`cluster` starts single-threaded dask worker processes (forked from this process when it runs no
other thread, spawned otherwise) with one thread per BLAS/OpenMP pool (`THREAD_VARIABLES`), or
connects to a running scheduler; `check_parallel` checks ``workers`` and ``scheduler`` and
`machine_workers` is the default count.
"""
import asyncio
import contextlib
import ctypes
import importlib.util
import logging
import multiprocessing
import os
import signal
import sys
import threading
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

import solvers
from ..errors import InvalidInput
from ..transformer.model import Model
from ..validation import check_int

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
