from __future__ import annotations

import pytest

from autotune.errors import OptionsError
from autotune.workload.candidate_cap import CandidateCap, apply_cap, cap_from_env
from autotune.workload.queries import load_workload
from tests.support.corpus import DOCS


def test_the_cap_is_read_as_hindsight_reads_it():
    assert cap_from_env({}) is None and cap_from_env({"HINDSIGHT_API_RERANKER_MAX_TOKENS_PER_CANDIDATE": ""}) is None
    assert cap_from_env({"HINDSIGHT_API_RERANKER_MAX_TOKENS_PER_CANDIDATE": "64"}) == CandidateCap(64, "o200k_base")
    assert cap_from_env({"HINDSIGHT_API_RERANKER_MAX_TOKENS_PER_CANDIDATE": "8",
                         "HINDSIGHT_API_TOKENIZER_ENCODING": "cl100k_base"}).encoding == "cl100k_base"
    for bad in ("x", "0", "-3"):
        with pytest.raises(OptionsError, match="MAX_TOKENS_PER_CANDIDATE"):
            cap_from_env({"HINDSIGHT_API_RERANKER_MAX_TOKENS_PER_CANDIDATE": bad})


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_documents_are_cut_exactly_as_hindsights_own_truncation_cuts_them(workload_file, encoding):
    from hindsight_api.engine.token_encoding import truncate_many_to_tokens

    workload = load_workload(workload_file)
    capped = apply_cap(workload, CandidateCap(5, encoding))
    for before, after in zip(workload.queries, capped.queries, strict=True):
        assert after.query == before.query  # the query is never cut
        assert after.documents == [t.text for t in truncate_many_to_tokens(before.documents, 5, encoding)]
    assert any(a != b for q, c in zip(workload.queries, capped.queries, strict=True)
               for a, b in zip(q.documents, c.documents, strict=True))
    assert capped.sha256 != workload.sha256  # nothing cached for the uncut workload is taken for it
    assert apply_cap(workload, CandidateCap(5, encoding)).sha256 == capped.sha256


def test_an_unknown_encoding_is_one_line(workload_file):
    with pytest.raises(OptionsError, match="not an encoding"):
        apply_cap(load_workload(workload_file), CandidateCap(5, "klingon"))


def test_run_replays_the_cap_and_records_it(tmp_path, tiny_model_dir, workload_file):
    from tests.support.cli import FAST, outputs, run_cli

    (tmp_path / "out").mkdir()
    uncut = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), *outputs(tmp_path),
                     *FAST, "--no-compose"])  # caches the uncut workload's reference first
    assert uncut[0] == 0, uncut[2]
    (tmp_path / "out" / ".env").write_text("HINDSIGHT_API_RERANKER_MAX_TOKENS_PER_CANDIDATE=4\n"
                                           + (tmp_path / "out" / ".env").read_text())
    status, _out, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                                *outputs(tmp_path), *FAST])
    assert status == 0, err
    assert "documents cut to 4 o200k_base tokens first" in err
    import yaml

    profile = yaml.safe_load(next((tmp_path / "out" / "profiles").glob("*.yaml")).read_text())
    cap = profile["workload"]["candidate_cap"]
    assert cap["max_tokens_per_candidate"] == 4 and cap["encoding"] == "o200k_base"
    assert cap["file_sha256"] == load_workload(workload_file).sha256 != profile["workload"]["sha256"]
    assert all(d not in profile_text for d in DOCS[:3] for profile_text in [str(profile)])
