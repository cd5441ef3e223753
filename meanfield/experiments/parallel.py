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
import contextvars
import signal
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from ..errors import Interrupted, InvalidInput
from ..threads import check_threads, stop_on, use_threads
from ..validation import check_int
from .report import show_progress
from .workers import FORKED, THREAD_VARIABLES, check_parallel, cluster, log_to_stderr, machine_workers   # offered here too


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
