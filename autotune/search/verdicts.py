"""Verdicts measured once per host type and kept beside the studies, in the study storage.

A study's name holds a digest of the space it searches, and the pre-checks narrow that space by timing (int8
leaves it where it is not faster beyond the noise). Two hosts of one type sharing a PostgreSQL study each timed
int8 on their own; on a borderline host one kept int8 and the other did not, and they split into two studies
(CI, session 23). Kept in the storage, the first host's verdict is every host's, and a rerun on one host reads
it as before. The verdicts live in one study of their own, as user attributes, written under the lock the
hosts take turns by (`shared_lock`): the first kept holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import optuna

from autotune.fileio import sha256_bytes
from autotune.gates.int8_speed import Int8Speed, speed_from_text, speed_text
from autotune.paths import caches_readable
from autotune.search.storage import shared_lock

VERDICTS_STUDY = "autotune-verdicts"  # no search of its own: `autotune studies` and the warm start skip it


def _verdicts(store: Any) -> optuna.Study:
    return optuna.create_study(study_name=VERDICTS_STUDY, storage=store, load_if_exists=True)


@dataclass(frozen=True)
class StoredSpeed:
    """int8's speed on one host type, model, ONNX Runtime and token cut (`key`), kept in `store`. With
    `--fresh` nothing is read and the new verdict replaces the kept one."""

    store: Any
    key: str

    def recall(self) -> Int8Speed | None:
        return self._held(_verdicts(self.store))

    def keep(self, speed: Int8Speed) -> Int8Speed:
        with shared_lock(self.store):
            study = _verdicts(self.store)
            agreed = self._held(study)
            if agreed is not None:  # another host kept one while this one measured: theirs holds
                return agreed
            study.set_user_attr(self._attr(), speed_text(speed))
            return speed

    def _attr(self) -> str:
        return f"int8-speed:{sha256_bytes(self.key.encode())[:24]}"

    def _held(self, study: optuna.Study) -> Int8Speed | None:
        """The verdict `study` keeps for this key; none with `--fresh`, which measures again."""
        if not caches_readable():
            return None
        text = study.user_attrs.get(self._attr())
        return speed_from_text(text) if isinstance(text, str) else None
