"""Issue 53: no hand-off or result is changed after it is made. Every dataclass a phase hands on, and every
one reachable from its fields (the finalists, the scope's outcome, the refinement, the memory report...), is
frozen: setting any of its fields fails."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re

import pytest

import autotune
from autotune.pipeline import handoffs
from autotune.pipeline.options import RunOutcome


def _dataclasses_by_name() -> dict[str, list[type]]:
    found: dict[str, list[type]] = {}
    for info in pkgutil.walk_packages(autotune.__path__, "autotune."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if dataclasses.is_dataclass(value) and isinstance(value, type) and value.__module__ == info.name:
                found.setdefault(value.__name__, []).append(value)
    return found


def _reachable() -> list[type]:
    """The hand-offs and run outcome, then every autotune dataclass named in the annotation of a field of one."""
    known = _dataclasses_by_name()
    roots = [c for c in vars(handoffs).values() if dataclasses.is_dataclass(c) and isinstance(c, type)
             and c.__module__ == handoffs.__name__]
    seen: dict[type, None] = {}
    todo = [*roots, RunOutcome]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen[cls] = None
        for f in dataclasses.fields(cls):
            for name in re.findall(r"[A-Za-z_]\w*", str(f.type)):
                todo += known.get(name, [])
    return list(seen)


REACHABLE = _reachable()


def test_the_walk_finds_the_results_inside_the_hand_offs():
    names = {c.__name__ for c in REACHABLE}
    assert {"Prepared", "Checked", "Raced", "Scoped", "Judged", "Picked", "Finalist", "SearchResult",
            "ScopeOutcome", "FrontierPoint", "Agreement", "RefineResult", "RefineStep", "Neighbour",
            "RunOutcome", "SelfCheck"} <= names


@pytest.mark.parametrize("cls", REACHABLE, ids=lambda c: f"{c.__module__.rsplit('.', 1)[-1]}.{c.__name__}")
def test_no_field_of_a_hand_off_or_result_can_be_set_after_it_is_made(cls):
    made = object.__new__(cls)  # frozen or not is a property of the class: no need to build a whole one
    for f in dataclasses.fields(cls):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(made, f.name, None)
