"""Ctrl-C and SIGTERM held where being cut short would do harm, then delivered.

Two places cannot take an interrupt in the middle:
- a set of outputs being put in place (they land together or not at all: `deferred_interrupts`);
- a compiled library initialising. A SIGINT that lands while a C extension's init runs turns into an exception
  inside it, and CPython does not always survive that: in the stress test's fifty Ctrl-Cs at random moments, a
  run once in about 300 died with SIGSEGV inside `onnx.onnx_cpp2py_export`'s init (pybind11), reached from a
  lazy `import onnx`, before it could say anything. Others once said `ImportError: initialization failed`.
  While a command runs, `held_imports` makes the import of every package outside the standard library hold
  the signal until the import is done: a Ctrl-C during `import transformers` waits for it (seconds), never a
  crash.
"""

from __future__ import annotations

import builtins
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import ModuleType

HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold Ctrl-C/SIGTERM for the block, then deliver each one received to the handler it would have reached
    (the CLI's, which raises KeyboardInterrupt; an enclosing hold; or none, where the signal is ignored).

    Python runs signal handlers in the main thread whichever thread the kernel picked (ORT and
    tokenizers keep pools of their own), so swapping the handler is what reliably defers them.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def hold(signum: int, frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in HELD}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(received):
            signal.raise_signal(signum)  # its handler runs here, as if it had come now


_depth = 0
_plain_import = builtins.__import__


def _held_import(name: str, globals: Mapping[str, object] | None = None, locals: Mapping[str, object] | None = None,
                 fromlist: Sequence[str] | None = (), level: int = 0) -> ModuleType:
    top = name.partition(".")[0]
    if level or top in sys.stdlib_module_names or top == "autotune" or (name in sys.modules and not fromlist):
        return _plain_import(name, globals, locals, fromlist, level)
    # not loaded yet, or `from x import y`: y may be a submodule, or a lazy module's attribute that loads one
    with deferred_interrupts():
        return _plain_import(name, globals, locals, fromlist, level)


@contextmanager
def held_imports() -> Iterator[None]:
    """While the block runs, a third-party `import` in the main thread holds Ctrl-C/SIGTERM until it is done."""
    global _depth, _plain_import
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth == 0:
        _plain_import = builtins.__import__
        builtins.__import__ = _held_import
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            builtins.__import__ = _plain_import

