"""SIGINT and SIGTERM from the first line of the ``vortexsim`` command to its exit.

Whatever the sequence of signals and wherever it lands, the command ends with exit
128 + the FIRST signal (130 for SIGINT, 143 for SIGTERM) and one line on stderr, never
by the signal itself and never with a traceback.  What a signal does depends on the
phase the command is in; each phase lets a number of signals through to the main
thread (:attr:`allowed`), and any signal beyond them ends the process at once
(:func:`exit_now`: one line unless the command has said its line, ``os._exit``)::

    phase      allowed   what the allowed signals do
    starting   0         (the package imports; nothing is written yet)
    command    1         KeyboardInterrupt (SIGINT) or Terminated (SIGTERM) in the main
                         thread: cleanups run (temporary files, the run lock) and
                         ``main`` says one line
    run        2         the handler of the run (:class:`~vortexsim.cli.execute.StopOnSignal`):
                         the first asks for a checkpoint, a second SIGINT aborts
    finalizing one more  (the ranks of an MPI run meet before MPI_Finalize while rank 0
                         may still write) let go; one beyond it ends the process
    exiting    0         (``main`` has returned; its line is said)

Python runs signal handlers only in the main thread, between bytecodes: a main thread
blocked in C (a read from a FIFO, a netCDF call that retries after EINTR) would never
see them.  So in the command process (:func:`install`, called by
:func:`vortexsim.cli.startup.guard_startup`) a watcher thread is woken by every signal
through :func:`signal.set_wakeup_fd`: it ends the process when more signals have come
than the phase allows, and, in the command phase, when the main thread has not taken
the first signal within :data:`GRACE` seconds.  Imported as a library (tests calling
``main`` in-process), nothing is installed at import: :func:`during` installs the
handler for its block only, and a signal beyond the allowed ones raises instead of
ending the process.  Only the standard library is used (this module loads before NumPy).
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading

__all__ = ["Terminated", "GRACE", "raise_for", "install", "installed", "during", "exit_now", "first",
           "say_line", "said", "exiting", "finish", "interrupted_line", "reset", "taken"]

#: [s] how long the main thread may take to act on a first signal outside a run before
#: the watcher ends the process (it is then blocked in C code)
GRACE = 5.0

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Terminated(BaseException):
    """SIGTERM in the main thread outside a run (what KeyboardInterrupt is for SIGINT)."""


def raise_for(signum):
    """Raise KeyboardInterrupt for SIGINT, :class:`Terminated` for SIGTERM."""
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated


class _State:
    """The one record of the signals of this process (module-level, as signals are)."""

    def __init__(self):
        self.installed = False        # the command process: watcher and exits at once
        self.pid = os.getpid()
        self.first = None             # the first signal's number: it decides the exit code
        self.seen = 0                 # signals the main thread's handler took
        self.received = 0             # signals the watcher counted (all that came)
        self.phase = "starting"
        self.allowed = 0
        self.react = None             # react(signum, seen) of the phase, main thread
        self.describe = None          # () -> str: what is on disk, for the line
        self.said = False             # the command's one line is out
        self.lock = threading.RLock()


_st = _State()


def _name(signum):
    return signal.Signals(signum).name


def interrupted_line(doing=""):
    """The one line of a command ended by its signals: which came first, then
    ``doing`` (what stopped), then what the phase's ``describe()`` says is on disk."""
    first = _st.first if _st.first is not None else signal.SIGINT
    text = "vortexsim: " + ("terminated" if first == signal.SIGTERM else "interrupted") + \
        f" by {_name(first)}"
    if _st.received > 1 or _st.seen > 1:
        text += f" ({max(_st.received, _st.seen)} signals)"
    if doing:
        text += f"; {doing}"
    if _st.describe is not None:
        with contextlib.suppress(Exception):
            text += f"; {_st.describe()}"
    return text


def _exit_text():
    if _st.phase == "starting":
        return (f"vortexsim: interrupted by {_name(_st.first)} while starting (nothing was "
                "written)")
    if _st.phase == "exiting":
        return (f"vortexsim: {_name(_st.first)} came as the command was exiting; its work "
                "was complete")
    return interrupted_line("exiting at once")


def exit_now():
    """End the process: the one line (unless said), then ``os._exit(128 + first)``.  In a
    process that is not the command (nothing installed) it raises for the first signal
    instead."""
    if not _st.installed or os.getpid() != _st.pid:
        raise_for(_st.first if _st.first is not None else signal.SIGINT)
    with _st.lock:                  # the watcher and the main thread may both come here
        if not _st.said:
            _st.said = True
            with contextlib.suppress(OSError):
                os.write(2, (_exit_text() + "\n").encode())
        os._exit(128 + (_st.first if _st.first is not None else signal.SIGINT))


def _handle(signum, frame):
    """The Python-level handler of SIGINT and SIGTERM, in the main thread."""
    _st.seen += 1
    if _st.first is None:
        _st.first = signum
    if _st.seen > _st.allowed or _st.react is None:
        if not _st.installed:       # a library process: the signal's own exception
            raise_for(signum)
        exit_now()
    _st.react(signum, _st.seen)


def _watch(fd):
    """The watcher thread: one byte per signal (``signal.set_wakeup_fd``)."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_BLOCK, set(SIGNALS))
    while True:
        try:
            select.select([fd], [], [])
            data = os.read(fd, 64)
        except BlockingIOError:
            continue
        except OSError:
            return
        for signum in data:
            if signum not in SIGNALS:
                continue
            _st.received += 1
            if _st.first is None:
                _st.first = signum
            if _st.received > _st.allowed:
                exit_now()
            if _st.phase == "command" and _st.received == 1:
                threading.Thread(target=_grace, daemon=True, name="vortexsim-grace").start()


def _grace():
    """End the process when the main thread has not taken the first signal in time."""
    done = threading.Event()
    done.wait(GRACE)
    if _st.seen == 0 and _st.phase == "command":
        exit_now()


def _unraisable(previous):
    def hook(unraisable):       # our exception, raised where Python can only print it
        if isinstance(unraisable.exc_value, (KeyboardInterrupt, Terminated)):
            return
        previous(unraisable)
    return hook


def _excepthook(previous):
    def hook(kind, value, tb):  # an interruption that escaped ``main``
        if issubclass(kind, (KeyboardInterrupt, Terminated)):
            if _st.first is None:
                _st.first = signal.SIGINT if issubclass(kind, KeyboardInterrupt) \
                    else signal.SIGTERM
            exit_now()
        previous(kind, value, tb)
    hook._vortexsim_startup = True
    return hook


def _after_fork_in_child():
    """A forked child (a worker of a library) is not the command: no watcher, no wakeup
    fd shared with the parent's watcher, Python's own signal behaviour."""
    _st.installed = False
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    for sig in SIGNALS:
        if signal.getsignal(sig) is _handle:
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT
                          else signal.SIG_DFL)


def install():
    """Install the handlers, the hooks and the watcher for the rest of the process's
    life (the command process only; called once, at the start of the import).  An
    ignored SIGINT stays ignored (a background job of a shell without job control)."""
    if _st.installed or threading.current_thread() is not threading.main_thread():
        return
    try:
        for sig in SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, _handle)
        read, write = os.pipe()
        os.set_blocking(write, False)
        os.set_blocking(read, False)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except (OSError, ValueError):       # pragma: no cover - no pipes or not main thread
        return
    _st.installed = True
    _st.pid = os.getpid()
    sys.excepthook = _excepthook(sys.excepthook)
    sys.unraisablehook = _unraisable(sys.unraisablehook)
    os.register_at_fork(after_in_child=_after_fork_in_child)
    threading.Thread(target=_watch, args=(read,), daemon=True,
                     name="vortexsim-signals").start()


def installed():
    """True in the command process (:func:`install` ran)."""
    return _st.installed


def taken():
    """How many signals the main thread has taken so far."""
    return _st.seen


def first():
    """The number of the first signal that came (None: none yet)."""
    return _st.first


def say_line(text):
    """Write the command's one line ``text`` to stderr; a signal that comes later (or
    while it is written) adds no other line."""
    with _st.lock:                  # not beside the watcher's line of an exit at once
        _st.said = True
        with contextlib.suppress(OSError, ValueError):   # a closed terminal or pipe (a
            sys.stderr.write(text + "\n")               # launcher that is gone)
            sys.stderr.flush()


def said():
    """Whether the command's one line is out."""
    return _st.said


def exiting():
    """``main`` has returned: any signal from now on ends the process at once, with the
    first signal's code."""
    _st.phase, _st.allowed, _st.react = "exiting", 0, None


def finish(code):
    """End the command process with ``code`` (``main``'s), the way the interpreter's
    exit would (non-daemon threads joined, atexit functions run, stdout and stderr
    flushed) but without its finalization, in whose last part the signals are back to
    their defaults and a late SIGINT or SIGTERM would end the process by the signal.
    A signal meanwhile ends it at once (:func:`exit_now`)."""
    import atexit  # noqa: PLC0415
    exiting()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    with _st.lock:
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))


@contextlib.contextmanager
def during(phase, allowed, react, describe=None):
    """The block runs in ``phase``: ``allowed`` signals (counted from the start of the
    process) go to ``react(signum, seen)`` in the main thread, any further one ends the
    process; ``describe()`` (optional) says what is on disk, for the line of an exit.
    Outside the command process the handler is installed for the block only."""
    in_main = threading.current_thread() is threading.main_thread()
    old = {}
    if not _st.installed and in_main:
        for sig in SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                old[sig] = signal.signal(sig, _handle)
    saved = (_st.phase, _st.allowed, _st.react, _st.describe)
    _st.phase, _st.allowed, _st.react = phase, allowed, react
    if describe is not None:
        _st.describe = describe
    try:
        yield _st
    finally:
        _st.phase, _st.allowed, _st.react, describe_before = saved
        if describe is not None and not _st.installed:
            _st.describe = describe_before
        for sig, handler in old.items():
            signal.signal(sig, handler)


def reset():
    """Forget the signals of an earlier ``main`` (in-process calls: tests)."""
    if not _st.installed:
        _st.first, _st.seen, _st.received, _st.said = None, 0, 0, False
        _st.describe = None
