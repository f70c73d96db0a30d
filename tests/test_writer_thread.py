"""The output thread (vortexsim/simulation/output_thread.py): one thread, submission order, a bounded
queue, failures raised on the main thread after the undo of the failed and discarded
writes, abort, signals left to the main thread."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from vortexsim.simulation.output_thread import Job, WriterThread


def _job(log, name, gate=None, fail=None):
    def func():
        if gate is not None:
            assert gate.wait(5)
        log.append((name, threading.current_thread().name))
        if fail is not None:
            raise fail
    return Job("w", func, lambda: log.append(("undo", name)))


def test_jobs_run_in_order_on_one_background_thread():
    log, w = [], WriterThread(max_pending=2)
    for k in range(6):
        w.submit(_job(log, k))
    w.flush()
    assert [name for name, _ in log] == list(range(6))
    threads = {t for _, t in log}
    assert len(threads) == 1 and threading.main_thread().name not in threads
    assert w.timings["w"][2] == 6 and w.pending == 0
    w.close()


def test_submit_waits_while_the_queue_is_full():
    log, gate, w = [], threading.Event(), WriterThread(max_pending=2)
    w.submit(_job(log, 0, gate))
    w.submit(_job(log, 1))
    threading.Timer(0.3, gate.set).start()
    t0 = time.perf_counter()
    w.submit(_job(log, 2))                  # waits until job 0 is written
    assert time.perf_counter() - t0 > 0.2 and w.waited > 0.2
    assert w.pending <= 2
    w.flush()
    assert [name for name, _ in log] == [0, 1, 2]
    assert w.timings["w"][1] > 0.2         # the wait is charged to the jobs waited for
    w.close()


def test_a_failure_discards_later_writes_and_is_raised_once_after_their_undo():
    log, gate, w = [], threading.Event(), WriterThread(max_pending=3)
    boom = OSError(28, "No space left on device")
    w.submit(_job(log, 0))
    w.submit(_job(log, 1, gate, fail=boom))
    w.submit(_job(log, 2))
    gate.set()
    with pytest.raises(OSError) as info:
        w.flush()
    assert info.value is boom and str(info.value) == "[Errno 28] No space left on device"
    assert [e for e in log if e[0] != 0] == [(1, log[1][1]), ("undo", 2), ("undo", 1)]
    w.flush()                                # raised once
    w.submit(_job(log, 3))                   # and the thread takes jobs again
    w.flush()
    assert log[-1][0] == 3
    w.close()


def test_a_failure_is_raised_by_the_next_submit_which_is_undone_first():
    log, w = [], WriterThread()
    w.submit(_job(log, 0, fail=RuntimeError("broken")))
    while w.pending:
        time.sleep(0.01)
        w._collect_ready()
    with pytest.raises(RuntimeError, match="broken"):
        w.submit(_job(log, 1))
    assert log[1:] == [("undo", 1), ("undo", 0)]
    w.close()


def test_abort_discards_the_queue_and_lets_the_write_in_flight_finish():
    """Job 0 is in flight (it has started) when abort is called, and it finishes only once
    abort has begun; job 1 is still queued then.  The order is made by events and by the
    writer's own state, not by timers, so a loaded machine runs it alike."""
    log, started, w = [], threading.Event(), WriterThread(max_pending=2)

    def in_flight():
        started.set()
        deadline = time.perf_counter() + 10.0
        while not w.aborting and time.perf_counter() < deadline:
            time.sleep(0.001)                 # until abort() has begun
        log.append((0, threading.current_thread().name))

    w.submit(Job("w", in_flight, lambda: log.append(("undo", 0))))
    w.submit(_job(log, 1))
    assert started.wait(10)
    assert w.abort(timeout=10) is True
    assert [name for name, _ in log] == [0, "undo"] and log[1] == ("undo", 1)


def test_signals_go_to_the_main_thread_which_can_be_interrupted_while_waiting():
    mask, gate, w = [], threading.Event(), WriterThread()
    w.submit(Job("w", lambda: mask.append(signal.pthread_sigmask(signal.SIG_BLOCK, []))))
    w.flush()
    assert {signal.SIGINT, signal.SIGTERM} <= set(mask[0])
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        w.submit(Job("w", lambda: gate.wait(5)))
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        t0 = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            w.flush()
        assert time.perf_counter() - t0 < 2
    finally:
        signal.signal(signal.SIGINT, old)
        gate.set()
    assert w.abort(timeout=5)
