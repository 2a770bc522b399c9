"""The hostile-input sweeps of issues 17 and 36 as one table: a parametrized test per category.

Each row is one thing a careless or hostile user did, in a project full of the user's own files: a `.env`, a
compose file, other models, notes, a workload. Whatever the row, the same things must hold: the documented
exit status; on an error, one `autotune: error:` line and no traceback; and every file the user had byte for
byte as it was, except those the row names (an `.env` whose autotune block a run may write). The detailed
regression tests for each item live beside the code they guard; this table is the sweep to rerun.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shutil
import signal
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import pytest
import yaml

from autotune.errors import ExitStatus
from autotune.outputs.envfile import BEGIN
from autotune.runtime.bert_onnx import build_bert_cross_encoder
from tests.hindsight.test_versions import response_1_1
from tests.support.cli import one_line, run_cli, run_in, snapshot
from tests.support.http import JsonHandler, serving
from tests.support.models import TINY_CONFIG, tiny_weights, write_model_dir, write_workload

FAST = ["--trials", "2", "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0"]
USER_ENV = "# mine\r\nHINDSIGHT_API_LLM_PROVIDER=none\r\nHINDSIGHT_API_LLM_API_KEY=sk-secret\r\n"
USER_COMPOSE = "services:\n  db:\n    image: postgres:15\n  hindsight:\n    image: hindsight:1.1.0\n"
DEAD_PID = 2**22 + 12345  # above the default pid_max: no process has it


# ---- the user's project, and a Hindsight that answers as the row says ------------------------------------------

class Hindsight(JsonHandler):
    """A fake Hindsight 1.1 whose answers the row picks; it notes every path it is asked for."""

    mode: ClassVar[str] = "ok"
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        if self.mode == "deep-version":
            return self._raw(b"[" * 100_000 + b"]" * 100_000)
        if self.mode == "junk-version":
            return self._json(200, {"api_version": "<script>alert(1)</script>"})
        if self.mode == "drip-version":
            return self._drip_headers(seconds=8)
        self._json(200, {"api_version": "1.1.0"})

    def do_POST(self) -> None:
        Hindsight.paths.append(self.path)
        self.rfile.read(int(self.headers["content-length"]))
        answer = response_1_1()
        trace = answer["trace"]
        reranking = trace["summary"]["phase_metrics"][0]
        if self.mode == "drip-headers":
            return self._drip_headers(seconds=40)
        if self.mode == "drip-body":
            self.send_response(200)
            self.send_header("content-length", "1000")
            self.end_headers()
            for _ in range(160):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.25)
            return
        if self.mode == "list":
            return self._json(200, [])
        if self.mode == "phase_metrics-5":
            trace["summary"]["phase_metrics"] = 5
        elif self.mode in ("nan", "1e308", "zero"):
            return self._raw(json.dumps(answer).replace('"duration_seconds": 0.25', '"duration_seconds": ' + {
                "nan": "NaN", "1e308": "1e308", "zero": "0"}[self.mode]).encode())
        elif self.mode == "bigint":
            return self._raw(json.dumps(answer).replace('"cross_encoder_score": 2.0', '"cross_encoder_score": 1'
                                                        + "0" * 400).encode())
        elif self.mode == "arms-nope":
            trace["retrieval_results"] = "nope"
        reranking["duration_seconds"] = 0.25
        self._json(200, answer)

    def _raw(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _drip_headers(self, seconds: float) -> None:
        """A status line, then a header a byte at a time: every read succeeds, the exchange never ends."""
        self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        for _ in range(int(seconds * 4)):
            self.wfile.write(b"x")
            self.wfile.flush()
            time.sleep(0.25)


@dataclass
class Project:
    root: Path
    model: Path  # the tiny cross-encoder, outside the project
    url: str  # the fake Hindsight
    outside: Path  # a directory beside the project, for what a row builds that is not the user's


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This host, probed once for the whole sweep (py-cpuinfo takes a second) through the probe-file seam."""
    from autotune.host import HostProbe

    path = tmp_path_factory.mktemp("probe") / "host.json"
    path.write_text(json.dumps(HostProbe().probe().to_dict()))
    return path


@pytest.fixture()
def project(tmp_path: Path, tiny_model_dir: Path, probed: Path, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[Project]:
    from autotune.host import PROBE_FILE_ENV

    monkeypatch.setenv(PROBE_FILE_ENV, str(probed))
    root = tmp_path / "project"
    (root / "mymodels" / "other").mkdir(parents=True)
    shutil.copy2(tiny_model_dir / "model.onnx", root / "mymodels" / "other" / "model.onnx")
    (root / "mymodels" / "inventory.txt").write_text("other: in use by prod\n")
    shutil.copytree(tiny_model_dir, root / "mine")
    (root / "mine" / "README.md").write_text("my notes on my model\n")
    (root / ".env").write_bytes(USER_ENV.encode())
    (root / "docker-compose.yaml").write_text(USER_COMPOSE)
    (root / "notes.md").write_text("not a directory\n")
    (root / "config").mkdir()
    (root / "config" / "hindsight.env").write_text("# mine\nHINDSIGHT_API_LLM_PROVIDER=none\n")
    (root / "linked.env").symlink_to(root / "config" / "hindsight.env")
    write_workload(root / "queries.jsonl")
    (root / "queries.txt").write_text("what is Maya allergic to\n")
    (root / "before.jsonl").write_text(json.dumps({"query": "what is Maya allergic to", "budget": "mid",
                                                   "documents": ["a", "b"], "hindsight_rerank_s": 0.5}) + "\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(root)
    Hindsight.mode, Hindsight.paths = "ok", []
    with serving(Hindsight) as url:
        yield Project(root, tiny_model_dir, url, outside)


@dataclass(frozen=True)
class Row:
    """One hostile act: the command (built in the project), the exit it must give and what its output says."""

    item: str  # the issue and item: "36.1", "17.D7"
    argv: Callable[[Project], list[str]]
    status: ExitStatus
    says: str = ""
    server: str = "ok"  # how the fake Hindsight answers
    changes: tuple[str, ...] = ()  # the user's files this act may change (globs)
    then: Callable[[Project], None] | None = None  # what else must hold afterwards


def sweep(row: Row, project: Project) -> None:
    """Run the row's command and check what every row shares."""
    Hindsight.mode = row.server
    before = snapshot(project.root)
    status, out, err = run_cli(row.argv(project))
    assert status == row.status, (out, err)
    assert "Traceback" not in err and "internal error" not in err, err
    if status not in (ExitStatus.OK, ExitStatus.INTERRUPTED):
        assert one_line(err), err
    assert row.says in out + err, (out, err)
    after = snapshot(project.root)
    for path, data in before.items():
        if not any(fnmatch.fnmatch(path, pattern) for pattern in row.changes):
            assert after.get(path) == data, f"{path} changed or went missing"
    if row.then is not None:
        row.then(project)


def run(*flags: str, model: bool = True) -> Callable[[Project], list[str]]:
    """`autotune run` on the project's workload with the fast settings, plus `flags`."""
    def argv(p: Project) -> list[str]:
        extra = [] if "--model" in flags or not model else ["--model", str(p.model)]
        return ["run", "--workload", "queries.jsonl", *extra, *flags, *FAST]
    return argv


def cli(*args: str) -> Callable[[Project], list[str]]:
    """A command with `{url}` and `{outside}` filled in from the project."""
    return lambda p: [a.format(url=p.url, outside=p.outside, model=p.model) for a in args]


def record(*flags: str) -> Callable[[Project], list[str]]:
    return cli("record", "--url", "{url}", "--bank", "b", "--queries", "queries.txt", "-o", "{outside}/rec.jsonl",
               "--retries", "0", *flags)


def verify(*flags: str) -> Callable[[Project], list[str]]:
    return cli("verify", "--url", "{url}", "--bank", "b", "--queries", "queries.txt", "--rounds", "1", *flags)


def written(path: str, check: Callable[[str], bool]) -> Callable[[Project], None]:
    def then(p: Project) -> None:
        target = p.root / path if not path.startswith("{outside}") else p.outside / path.removeprefix("{outside}/")
        assert target.exists() and check(target.read_text()), path
    return then


def absent(path: str) -> Callable[[Project], None]:
    def then(p: Project) -> None:
        assert not (p.outside / path).exists(), path
    return then


def ids(table: dict[str, Row]) -> list[str]:
    return sorted(table)


# ---- data loss: output flags never delete, replace or hide the user's files -----------------------------------

def _with_leftover_staging(p: Project) -> list[str]:
    leftover = p.root / "models" / f".node.stage-{DEAD_PID}-abc123"
    leftover.mkdir(parents=True)
    (leftover / "model.onnx").write_bytes(b"\0" * 1024)  # half a model, from a run killed while staging
    return run("--name", "node")(p)


def _only_node_is_left(p: Project) -> None:
    assert sorted(x.name for x in (p.root / "models").iterdir()) == ["node"]


def _link_written_through(p: Project) -> None:
    assert (p.root / "linked.env").is_symlink()
    text = (p.root / "config" / "hindsight.env").read_text()
    assert text.startswith("# mine\nHINDSIGHT_API_LLM_PROVIDER=none\n") and BEGIN in text


def _damaged_block(text: str) -> Callable[[Project], list[str]]:
    def argv(p: Project) -> list[str]:
        (p.outside / "damaged.env").write_text(text)
        return run("--env-file", str(p.outside / "damaged.env"))(p)
    return argv


def _made(path: str, text: str, *flags: str) -> Callable[[Project], list[str]]:
    """The user has made `path` (a file, or with no text a link to `mymodels`); then run with `flags`."""
    def argv(p: Project) -> list[str]:
        target = p.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if text:
            target.write_text(text)
        else:
            target.symlink_to(p.root / "mymodels")
        return run(*flags)(p)
    return argv


DATA_LOSS = {
    "model-out-is-a-symlink": Row("36.1", _made("linked-models", "", "--model-out", "linked-models"),
                                  ExitStatus.BAD_OPTIONS, "symbolic link"),
    "compose-named-like-a-base-file": Row("36.2", run("--target", "tei", "--compose-file", "compose.yaml"),
                                          ExitStatus.BAD_OPTIONS, "base file"),
    "compose-exists-not-autotunes": Row("36.2", _made("override.yaml", USER_COMPOSE, "--target", "tei",
                                                      "--compose-file", "override.yaml"),
                                        ExitStatus.BAD_OPTIONS, "autotune did not write it"),
    "profile-exists-not-autotunes": Row("36.2", _made("profiles/node.yaml", "my: own yaml\n", "--name", "node"),
                                        ExitStatus.BAD_OPTIONS, "autotune did not write it"),
    "model-out-holds-the-users-models": Row("36.1", run("--model-out", "mymodels"), ExitStatus.BAD_OPTIONS,
                                            "autotune did not write it"),
    "model-out-is-the-input-model": Row("36.1", run("--model", "mine", "--model-out", "mine"),
                                        ExitStatus.BAD_OPTIONS, "is also --model"),
    "model-out-is-the-project": Row("36.1", run("--model-out", "."), ExitStatus.BAD_OPTIONS, "would hold"),
    "model-out-is-a-file": Row("36.1", run("--model-out", "notes.md"), ExitStatus.BAD_OPTIONS, "not a directory"),
    "compose-is-the-users-base-file": Row("36.2", run("--target", "tei", "--compose-file", "docker-compose.yaml"),
                                          ExitStatus.BAD_OPTIONS, "base file"),
    "env-file-is-the-workload": Row("36.2", run("--env-file", "queries.jsonl"), ExitStatus.BAD_OPTIONS,
                                    "is also --workload"),
    "env-file-is-a-symlink": Row("36.3", run("--env-file", "linked.env", "--no-compose"), ExitStatus.OK,
                                 changes=("config/hindsight.env",), then=_link_written_through),
    "staging-a-killed-run-left": Row("36.4", _with_leftover_staging, ExitStatus.OK, changes=(".env",),
                                     then=_only_node_is_left),
    "compose-is-a-directory": Row("36.15", run("--target", "tei", "--compose-file", "mymodels"),
                                  ExitStatus.BAD_OPTIONS, "not a regular file"),
    "env-file-is-a-directory": Row("17.D7", run("--env-file", "mymodels"), ExitStatus.IO_ERROR),
    "env-file-is-dev-full": Row("17.D7", run("--env-file", "/dev/full"), ExitStatus.IO_ERROR),
    "env-block-never-closed": Row("17.D8", _damaged_block(f"A=1\n{BEGIN}\nX=1\n"), ExitStatus.IO_ERROR,
                                  "autotune block"),
    "env-block-opened-twice": Row("17.D8", _damaged_block(f"A=1\n{BEGIN}\n{BEGIN}\n"), ExitStatus.IO_ERROR,
                                  "autotune block"),
}


@pytest.mark.parametrize("case", ids(DATA_LOSS))
def test_data_loss(project, case):
    sweep(DATA_LOSS[case], project)


# ---- wrong answers: nothing false is reported or written --------------------------------------------------------

def _nan_model(p: Project) -> list[str]:
    weights = tiny_weights(TINY_CONFIG)
    weights["classifier.bias"] = np.full_like(weights["classifier.bias"], np.nan)
    model = write_model_dir(p.outside / "nan", build_bert_cross_encoder(weights, TINY_CONFIG)[0], TINY_CONFIG)
    return run("--model", str(model))(p)


def _before(value: str) -> Callable[[Project], list[str]]:
    def argv(p: Project) -> list[str]:
        (p.outside / "before.jsonl").write_text('{"query": "what is Maya allergic to", "budget": "mid", '
                                                f'"documents": ["a"], "hindsight_rerank_s": {value}}}\n')
        return verify("--before", "{outside}/before.jsonl")(p)
    return argv


def _mount_stays_absolute(p: Project) -> None:
    service = yaml.safe_load((p.root / "compose.autotune.yaml").read_text())["services"]["hindsight"]
    assert service["volumes"] == [f"{p.outside / 'model'}:/models/r:ro"]


def _resume_measures_nothing_twice(p: Project) -> None:
    status, out, err = run_cli(run("--trials", "4", "--name", "r", "--target", "tei", "--no-compose",
                                   "--seed", "5")(p))
    assert status == ExitStatus.OK and "(2 resumed" in out, err
    history = yaml.safe_load((p.root / "profiles" / "r.yaml").read_text())["search"]["history"]
    measured = [tuple(sorted((k, v) for k, v in t.items() if k in ("batch_size", "intra_op_threads",
                                                                      "length_sort", "precision")))
                for t in history if t.get("duplicate_of") is None]
    assert len(measured) == len(set(measured))


WRONG_ANSWERS = {
    "server-duration-nan": Row("36.5", verify("--before", "before.jsonl"), ExitStatus.UPSTREAM, "duration",
                               server="nan"),
    "server-duration-1e308": Row("36.5", verify("--before", "before.jsonl"), ExitStatus.UPSTREAM, "duration",
                                 server="1e308"),
    "recorded-duration-nan": Row("36.5", _before("NaN"), ExitStatus.BAD_WORKLOAD, "hindsight_rerank_s"),
    "recorded-duration-negative": Row("36.5", _before("-2"), ExitStatus.BAD_WORKLOAD, "hindsight_rerank_s"),
    "model-out-absolute-in-compose": Row("36.7", cli("run", "--workload", "queries.jsonl", "--model", "{model}",
                                                     "--model-out", "{outside}/model", "--model-path-in-container",
                                                     "/models/r", *FAST), ExitStatus.OK, changes=(".env",),
                                         then=_mount_stays_absolute),
    "model-scores-nan": Row("17.D2", _nan_model, ExitStatus.BAD_MODEL, "non-finite scores"),
    "parity-tolerance-nan": Row("17.D5", run("--fp32-max-abs", "nan"), ExitStatus.BAD_OPTIONS),
    "timeout-nan": Row("17.D5", run("--timeout", "nan"), ExitStatus.BAD_OPTIONS),
    "wait-quiet-inf": Row("17.D5", run("--wait-quiet", "inf"), ExitStatus.BAD_OPTIONS),
    "resume-remeasures": Row("17.D9", run("--trials", "2", "--name", "r", "--target", "tei", "--no-compose",
                                          "--seed", "5"), ExitStatus.OK, changes=(".env",),
                             then=_resume_measures_nothing_twice),
}


@pytest.mark.parametrize("case", ids(WRONG_ANSWERS))
def test_wrong_answers(project, case):
    sweep(WRONG_ANSWERS[case], project)


# ---- injection: nothing from a profile, a flag or a bank id lands where it must not -----------------------------

@pytest.fixture(scope="module")
def tei_profile(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("tei-profile")
    write_workload(work / "queries.jsonl")
    status, _, err = run_in(work, ["run", "--workload", str(work / "queries.jsonl"), "--model", str(tiny_model_dir),
                                   "--env-file", str(work / ".env"), "--profile-dir", str(work / "profiles"),
                                   "--name", "node", "--target", "tei", "--no-compose", *FAST])
    assert status == ExitStatus.OK, err
    return yaml.safe_load((work / "profiles" / "node.yaml").read_text())


HOSTILE_ENV = {
    "key-with-a-newline": {"EVIL\nLD_PRELOAD": "/tmp/x.so"},
    "path": {"PATH": "/tmp/evil"},
    "llm-api-key": {"HINDSIGHT_API_LLM_API_KEY": "sk-stolen"},
    "end-marker-in-a-key": {"# <<< autotune managed block <<<": "1"},
    "empty-value": {"HINDSIGHT_API_RERANKER_TEI_BATCH_SIZE": ""},
    "value-with-a-newline": {"HINDSIGHT_API_RERANKER_TEI_URL": "http://r:8080\nLD_PRELOAD=/tmp/x.so"},
    "marker-in-a-value": {"HINDSIGHT_API_RERANKER_TEI_URL": "# <<< autotune managed block <<<"},
}


def _bank_stays_one_segment(p: Project) -> None:
    assert Hindsight.paths == ["/v1/default/banks/..%2F..%2Fadmin%2Fdelete%3Fx%3D/memories/recall"]


INJECTION = {
    "tei-url-with-a-newline": Row("36.8", run("--tei-url", "http://r:8080\nPATH=/tmp"), ExitStatus.BAD_OPTIONS,
                                  "line break"),
    "container-path-with-a-newline": Row("36.8", run("--model-path-in-container", "/m\nLD_PRELOAD=/x.so"),
                                         ExitStatus.BAD_OPTIONS, "line break"),
    "bank-id-traversal": Row("17.D22", record("--bank", "../../admin/delete?x="), ExitStatus.OK,
                             then=_bank_stays_one_segment),
    **{f"profile-env-{name}": Row("36.8", lambda p, name=name: _hostile_profile(p, name), ExitStatus.BAD_OPTIONS)
       for name in HOSTILE_ENV},
}
_PROFILE: dict[str, Any] = {}


def _hostile_profile(p: Project, name: str) -> list[str]:
    profile = json.loads(json.dumps(_PROFILE["tei"]))
    profile["env"].update(HOSTILE_ENV[name])
    (p.outside / "hostile.yaml").write_text("# autotune profile\n" + yaml.safe_dump(profile))
    return ["apply", "--profile", str(p.outside / "hostile.yaml"), "--env-file", ".env"]


@pytest.mark.parametrize("case", ids(INJECTION))
def test_injection(project, tei_profile, case):
    _PROFILE["tei"] = tei_profile
    sweep(INJECTION[case], project)


# ---- hangs and memory: every wait is bounded, every read is limited ---------------------------------------------

def _fifo(p: Project) -> list[str]:
    os.mkfifo(p.outside / "fifo")
    return ["run", "--workload", str(p.outside / "fifo"), "--model", str(p.model), *FAST]


def _capped_env(p: Project) -> list[str]:
    (p.outside / "capped.env").write_text("HINDSIGHT_API_RERANKER_MAX_CANDIDATES=5\n")
    return run("--env-file", str(p.outside / "capped.env"), "--no-compose")(p)


HANGS = {
    "record-headers-drip": Row("36.9", record("--timeout", "1"), ExitStatus.UPSTREAM, "timed out",
                               server="drip-headers"),
    "version-headers-drip": Row("36.9", record("--timeout", "1"), ExitStatus.OK, server="drip-version",
                                then=written("{outside}/rec.jsonl", lambda t: "hindsight_version" not in t)),
    "record-body-drips": Row("17.D18", record("--timeout", "1"), ExitStatus.UPSTREAM, "timed out",
                             server="drip-body"),
    "workload-is-dev-zero": Row("36.11", cli("run", "--workload", "/dev/zero", "--model", "{model}"),
                                ExitStatus.BAD_WORKLOAD, "not a regular file"),
    "workload-is-a-fifo": Row("36.11", _fifo, ExitStatus.BAD_WORKLOAD, "not a regular file"),
    "pools-past-hindsights-cap": Row("36.11", _capped_env, ExitStatus.OK, "warning: 4 of 4 queries"),
}


@pytest.mark.parametrize("case", ids(HANGS))
def test_hangs(project, case):
    sweep(HANGS[case], project)


# ---- crashes: bad input is one line with a documented exit, never "internal error" ------------------------------

def _workload_line(line: str) -> Callable[[Project], list[str]]:
    def argv(p: Project) -> list[str]:
        (p.outside / "bad.jsonl").write_text(line + "\n")
        return ["run", "--workload", str(p.outside / "bad.jsonl"), "--model", str(p.model), *FAST]
    return argv


def _vocab_behind_identity(p: Project) -> list[str]:
    cfg = dict(TINY_CONFIG, vocab_size=500)
    model = build_bert_cross_encoder(tiny_weights(cfg), cfg)[0]
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name == "input_ids":
                node.input[i] = "input_ids_copy"
    model.graph.node.insert(0, onnx.helper.make_node("Identity", ["input_ids"], ["input_ids_copy"]))
    return run("--model", str(write_model_dir(p.outside / "identity", model, cfg)))(p)


def _profile_text(text: str, command: str) -> Callable[[Project], list[str]]:
    def argv(p: Project) -> list[str]:
        (p.outside / "p.yaml").write_text(text)
        return [command, "--profile", str(p.outside / "p.yaml"), *(["--model", str(p.model)] if command == "check"
                                                                   else ["--out", str(p.outside / "r.html")])]
    return argv


def _corrupt_journal(p: Project) -> list[str]:
    state = Path(os.environ["AUTOTUNE_STATE_DIR"])
    state.mkdir(parents=True, exist_ok=True)
    (state / "studies.journal").write_text("{garbage\n")
    return run()(p)


def _resume_with_a_bad_line(p: Project) -> list[str]:
    (p.outside / "rec.jsonl").write_text('{"query": "a", "documents": ["x"]}\nnot json\n')
    return record("--resume")(p)


def _bom(p: Project) -> list[str]:
    (p.outside / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + (p.root / "queries.jsonl").read_bytes())
    return ["run", "--workload", str(p.outside / "bom.jsonl"), "--model", str(p.model), "--no-compose", *FAST]


DEEP = '{"query": "q", "documents": ["a"], "x": ' + "[" * 900 + "]" * 900 + "}"
BIG_SCORE = '{"query": "q", "documents": ["a"], "hindsight_scores": [1' + "0" * 400 + "]}"
CRASHES = {
    "workload-nested-900-deep": Row("36.12", _workload_line(DEEP), ExitStatus.BAD_WORKLOAD, "line 1"),
    "workload-5000-digit-number": Row("36.12", _workload_line('{"query": "q", "documents": ["a"], "x": 1'
                                                              + "0" * 5000 + "}"), ExitStatus.BAD_WORKLOAD),
    "recorded-400-digit-score": Row("36.12", _workload_line(BIG_SCORE), ExitStatus.BAD_WORKLOAD, "hindsight_scores"),
    "server-answers-a-list": Row("36.13", record(), ExitStatus.UPSTREAM, "JSON list", server="list",
                                 then=absent("rec.jsonl")),
    "server-phase_metrics-5": Row("36.13", verify(), ExitStatus.UPSTREAM, "phase_metrics", server="phase_metrics-5"),
    "server-duration-zero": Row("36.13", verify("--before", "before.jsonl"), ExitStatus.UPSTREAM, "duration",
                                server="zero"),
    "server-score-bigint": Row("36.13", record(), ExitStatus.UPSTREAM, "cross_encoder_score", server="bigint"),
    "server-version-deep": Row("36.13", record(), ExitStatus.OK, server="deep-version",
                               then=written("{outside}/rec.jsonl", lambda t: "hindsight_version" not in t)),
    "url-broken-ipv6": Row("36.13", cli("record", "--url", "http://u:p@[::1", "--bank", "b", "--queries",
                                        "queries.txt", "-o", "{outside}/rec.jsonl"), ExitStatus.BAD_OPTIONS,
                           then=absent("rec.jsonl")),
    "url-without-a-scheme": Row("36.15", cli("record", "--url", "localhost:8888", "--bank", "b", "--queries",
                                             "queries.txt", "-o", "{outside}/rec.jsonl"), ExitStatus.BAD_OPTIONS),
    "server-version-junk": Row("36.15", record(), ExitStatus.OK, server="junk-version",
                               then=written("{outside}/rec.jsonl", lambda t: "script" not in t)),
    "wait-quiet-negative": Row("36.15", run("--wait-quiet", "-5"), ExitStatus.BAD_OPTIONS),
    "query-lone-surrogate": Row("17.D1", _workload_line('{"query": "bad \\ud800", "documents": ["a"]}'),
                                ExitStatus.BAD_WORKLOAD, "line 1"),
    "vocabulary-behind-identity": Row("17.D3", _vocab_behind_identity, ExitStatus.BAD_MODEL),
    "threads-1000": Row("17.D4", run("--max-threads", "1000"), ExitStatus.BAD_OPTIONS),
    "seed-negative": Row("17.D6", run("--seed", "-1"), ExitStatus.BAD_OPTIONS),
    "seed-past-32-bits": Row("17.D6", run("--seed", str(2**36)), ExitStatus.BAD_OPTIONS),
    "storage-bogus": Row("17.D6", run("--storage", "bogus://x"), ExitStatus.BAD_OPTIONS),
    "storage-nowhere": Row("17.D6", run("--storage", "sqlite:////nonexistent/dir/x.db"), ExitStatus.BAD_OPTIONS),
    "check-profile-host-a-string": Row("17.D10", _profile_text('schema: 1\nconfig: {batch_size: 4}\nhost: "str"\n',
                                                               "check"), ExitStatus.BAD_OPTIONS),
    "check-profile-isa-a-string": Row("17.D10", _profile_text(
        "schema: 1\nconfig: {batch_size: 1, intra_op_threads: 0, length_sort: false, precision: fp32}\n"
        "host: {isa: x, cores: 3}\n", "check"), ExitStatus.BAD_OPTIONS),
    "report-profile-alias-bomb": Row("17.D10", _profile_text(
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nschema: 1\nconfig: *c\n", "report"), ExitStatus.BAD_OPTIONS),
    "study-journal-corrupt": Row("17.D11", _corrupt_journal, ExitStatus.DAMAGED_STATE, "--fresh"),
    "server-arms-not-a-list": Row("17.D19", record(), ExitStatus.UPSTREAM, "retrieval_results", server="arms-nope"),
    "record-retries-negative": Row("17.D20", record("--retries", "-1"), ExitStatus.BAD_OPTIONS,
                                   then=absent("rec.jsonl")),
    "record-timeout-zero": Row("17.D20", record("--timeout", "0"), ExitStatus.BAD_OPTIONS, then=absent("rec.jsonl")),
    "record-timeout-negative": Row("17.D20", record("--timeout", "-1"), ExitStatus.BAD_OPTIONS,
                                   then=absent("rec.jsonl")),
    "record-timeout-nan": Row("17.D20", record("--timeout", "nan"), ExitStatus.BAD_OPTIONS, then=absent("rec.jsonl")),
    "record-resume-bad-line": Row("17.D21", _resume_with_a_bad_line, ExitStatus.BAD_WORKLOAD, "line 2"),
    "workload-with-a-bom": Row("17.BOM", _bom, ExitStatus.OK, changes=(".env",)),
}


@pytest.mark.parametrize("case", ids(CRASHES))
def test_crashes(project, case):
    sweep(CRASHES[case], project)


# ---- serve: a bad request is answered, and the server stays healthy ---------------------------------------------

@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[str]:
    from tests.support.http import LiveServer
    from tests.support.serving import make_service as _service

    with LiveServer(_service(tiny_model_dir, max_body_bytes=8 * 1024 * 1024)) as live:
        yield live.url


def _chunks() -> Iterator[bytes]:
    for _ in range(2000):
        yield b"x" * 8192


def _stall_150_clients(url: str) -> contextlib.AbstractContextManager[Any]:
    @contextlib.contextmanager
    def stalled() -> Iterator[None]:
        host, port = url.removeprefix("http://").split(":")
        socks = []
        try:
            for _ in range(150):
                s = socket.create_connection((host, int(port)))
                s.sendall(b"POST /rerank HTTP/1.1\r\nHost: x\r\n")
                socks.append(s)
            yield
        finally:
            for s in socks:
                s.close()
    return stalled()


JSON = {"content-type": "application/json"}
SERVE = {  # item, request (keyword arguments to httpx.post on /rerank), the status it must get
    "text-plain-body": ("36.10", {"content": b'{"query": "q", "texts": ["a"]}', "headers": {
        "content-type": "text/plain"}}, 415),
    "query-of-7-mb": ("36.10", {"json": {"query": "word " * 1_400_000, "texts": ["a", "b"]}}, 200),
    "chunked-past-the-limit": ("17.D12", {"content": _chunks, "headers": JSON}, 413),
    "query-lone-surrogate": ("17.D13", {"content": b'{"query": "\\ud800", "texts": ["a"]}', "headers": JSON}, 422),
    "json-100k-deep": ("17.D13", {"content": b'{"query": "q", "texts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                                  "headers": JSON}, 422),
    "150-stalled-clients": ("17.D14", {"json": {"query": "q", "texts": ["a", "b"]}, "around": _stall_150_clients},
                            200),
}


@pytest.mark.parametrize("case", ids(SERVE))  # type: ignore[arg-type]
def test_serve(server, case):
    import httpx

    _item, request, expected = SERVE[case]
    request = dict(request)
    around = request.pop("around", None)
    if callable(request.get("content")):
        request["content"] = request["content"]()
    with around(server) if around else contextlib.nullcontext():
        resp = httpx.post(server + "/rerank", timeout=60, **request)
        assert resp.status_code == expected, resp.text[:300]
        assert httpx.get(server + "/health", timeout=10).status_code == 200


_HELD: list[socket.socket] = []


def _serve_env(p: Project, port_taken: str = "", **extra: str) -> list[str]:
    env = {"AUTOTUNE_BATCH_SIZE": "4", "AUTOTUNE_INTRA_OP_THREADS": "1", "AUTOTUNE_LENGTH_SORT": "true",
           "AUTOTUNE_PRECISION": "fp32", "AUTOTUNE_MODEL": str(p.model), **extra}
    (p.outside / "serve.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    held = socket.socket()  # a free port (the refusal must come from the row's fault), or a taken one
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    if port_taken:
        held.listen()
        _HELD.append(held)  # closed when the module's tests are done
    else:
        held.close()
    return ["serve", "--env-file", str(p.outside / "serve.env"), "--port", str(port)]


def _huge_batch_profile(command: str) -> Callable[[Project], list[str]]:
    def argv(p: Project) -> list[str]:
        status, _, err = run_cli(run("--target", "tei", "--no-compose", "--name", "big",
                                     "--env-file", str(p.outside / "x.env"),
                                     "--profile-dir", str(p.outside / "profiles"))(p))
        assert status == ExitStatus.OK, err
        path = p.outside / "profiles" / "big.yaml"
        path.write_text(path.read_text().replace("batch_size: ", "batch_size: 1e9 #", 1))
        return [command, "--profile", str(path), *(["--model", str(p.model)] if command == "check" else [])]
    return argv


SERVE_START = {
    "queue-zero": Row("17.D15", lambda p: _serve_env(p, AUTOTUNE_MAX_QUEUE="0"), ExitStatus.BAD_OPTIONS),
    "client-batch-negative": Row("17.D15", lambda p: _serve_env(p, AUTOTUNE_MAX_CLIENT_BATCH_SIZE="-5"),
                                 ExitStatus.BAD_OPTIONS),
    "model-missing": Row("17.D16", lambda p: _serve_env(p, AUTOTUNE_MODEL="/nonexistent"), ExitStatus.BAD_MODEL),
    "port-out-of-range": Row("17.D17", lambda p: [*_serve_env(p)[:-1], "99999"], ExitStatus.BAD_OPTIONS),
    "port-in-use": Row("17.D17", lambda p: _serve_env(p, port_taken="yes"), ExitStatus.BAD_OPTIONS, "cannot listen"),
    "profile-batch-1e9-serve": Row("36.10", _huge_batch_profile("serve"), ExitStatus.BAD_OPTIONS, "batch_size"),
    "profile-batch-1e9-check": Row("36.10", _huge_batch_profile("check"), ExitStatus.BAD_OPTIONS, "batch_size"),
}


@pytest.mark.parametrize("case", ids(SERVE_START))
def test_serve_start(project, case):
    sweep(SERVE_START[case], project)


# ---- interrupts: a stop says truthfully what it left ------------------------------------------------------------

def _interrupt_staging(monkeypatch: pytest.MonkeyPatch) -> None:
    import autotune.outputs.model_dir as model_dir

    copies: list[Any] = []

    def copy_then_interrupt(src: Any, dst: Any, *a: Any, **k: Any) -> Any:
        copies.append(dst)
        if len(copies) == 2:  # model.onnx is in place, the tokenizer files are not
            raise KeyboardInterrupt
        return shutil.copyfile(src, dst, *a, **k)

    monkeypatch.setattr(model_dir.shutil, "copyfile", copy_then_interrupt)


def _interrupt_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.fileio import StagedFiles

    commit = StagedFiles.commit

    def commit_with_a_signal(self: StagedFiles) -> None:
        if self._output:  # the run's outputs, not a cache file written on the way
            os.kill(os.getpid(), signal.SIGINT)  # held until the files are in place
        commit(self)

    monkeypatch.setattr(StagedFiles, "commit", commit_with_a_signal)


def _interrupt_an_import(monkeypatch: pytest.MonkeyPatch) -> None:
    import autotune.pipeline.tune as tune

    def load_cut_short(*a: Any, **k: Any) -> None:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            raise ImportError("initialization failed") from None  # what numpy's C init says

    monkeypatch.setattr(tune, "load", load_cut_short)


def _nothing_staged(p: Project) -> None:
    assert not (p.root / "models").exists() or not list((p.root / "models").iterdir())


INTERRUPTS = {  # item, what is cut short, the row
    "while-staging-the-model": (_interrupt_staging, Row("36.4", run("--name", "node"), ExitStatus.INTERRUPTED,
                                                         "nothing was written", then=_nothing_staged)),
    "during-the-commit": (_interrupt_commit, Row("36.6", run("--name", "node"), ExitStatus.INTERRUPTED,
                                                 "written and complete", changes=(".env",))),
    "surfacing-as-an-import-error": (_interrupt_an_import, Row("36.14", run(), ExitStatus.INTERRUPTED,
                                                               "interrupted")),
}


@pytest.mark.parametrize("case", ids(INTERRUPTS))  # type: ignore[arg-type]
def test_interrupts(project, monkeypatch, case):
    cut_short, row = INTERRUPTS[case]
    cut_short(monkeypatch)
    sweep(row, project)


def test_the_sweep_covers_every_item():
    """Issue 36's fifteen items and issue 17's defects each have at least one row."""
    rows = [*DATA_LOSS.values(), *WRONG_ANSWERS.values(), *INJECTION.values(), *HANGS.values(), *CRASHES.values(),
            *SERVE_START.values(), *(row for _, row in INTERRUPTS.values())]
    items = {row.item for row in rows} | {item for item, _, _ in SERVE.values()}
    expected = {f"36.{n}" for n in range(1, 16)} | {f"17.D{n}" for n in range(1, 23)} | {"17.BOM"}
    assert expected - items == set()
