"""Interrupts held, then delivered: while outputs land, and while a compiled library initialises."""

from __future__ import annotations

import builtins
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from autotune import signals
from autotune.signals import deferred_interrupts, held_imports

# A thread sends SIGINT every half millisecond while the main thread imports onnx (0.6-0.9 s here: ml_dtypes,
# protobuf, onnx's pybind11 extension). Unheld, the first signal cuts the import short (once in some 300 runs
# it landed in the extension's init and CPython died with SIGSEGV); held, onnx loads whole and the interrupt
# comes after.
STORM = textwrap.dedent("""
    import os, signal, sys, threading, time
    from autotune.signals import held_imports

    stop, started = threading.Event(), threading.Event()

    def storm():
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGINT)
            started.set()
            time.sleep(0.0005)

    class StormOnceImporting:  # the storm starts inside `import onnx`, when the import system looks for it
        def find_spec(self, name, path=None, target=None):
            if name == "onnx" and not started.is_set():
                threading.Thread(target=storm, daemon=True).start()
                started.wait()
            return None

    sys.meta_path.insert(0, StormOnceImporting())
    interrupted = False
    with held_imports():
        try:
            import onnx
        except KeyboardInterrupt:
            interrupted = True
        while True:  # a signal still in flight may land in the next statements: stop the storm first
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                stop.set()
                break
            except KeyboardInterrupt:
                interrupted = True
    whole = "onnx" in sys.modules and hasattr(sys.modules["onnx"], "helper")
    print(f"interrupted={interrupted} whole={whole}", flush=True)
""")


def test_an_import_under_a_storm_of_ctrl_c_loads_whole_and_the_interrupt_comes_after():
    proc = subprocess.run([sys.executable, "-c", STORM], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "interrupted=True whole=True", proc.stdout + proc.stderr[-3000:]


def test_a_held_signal_reaches_the_handler_it_would_have_reached():
    with pytest.raises(KeyboardInterrupt), deferred_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with deferred_interrupts():  # ignored before: still ignored after (a spawned child ignores Ctrl-C)
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, before)
    with pytest.raises(KeyboardInterrupt), deferred_interrupts():
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGINT)
        inner_done = True  # the inner block handed it to the outer hold, which delivers it at its own end
    assert inner_done


def test_held_imports_leave_the_standard_library_and_autotune_alone_and_restore_import():
    plain = builtins.__import__
    with held_imports():
        assert builtins.__import__ is not plain
        with held_imports():
            pass
        assert builtins.__import__ is not plain  # the outer block still holds
        import json  # noqa: F401  (stdlib: the plain import, no handler swapped)

        seen = []
        original = signal.signal
        try:
            signal.signal = lambda *a: seen.append(a) or original(*a)  # type: ignore[assignment]
            import collections.abc  # noqa: F401

            from autotune import errors  # noqa: F401
            assert not seen
            from optuna import trial  # noqa: F401
            assert seen  # a third-party `from x import y` is held
        finally:
            signal.signal = original
    assert builtins.__import__ is plain and signals._depth == 0
