"""TEI's launcher flags: grouped as TEI parses them, ignored with a warning each, refused where they change scores."""

from __future__ import annotations

import pytest

from autotune.errors import OptionsError
from autotune.serve.tei_flags import Leftover, ignored_flags, split_flags


def test_flags_group_with_their_values_in_order():
    assert split_flags(["--max-concurrent-requests", "512", "--json-output", "--otlp-endpoint=http://x:4317"]) == [
        Leftover("--max-concurrent-requests", ("512",)), Leftover("--json-output", ()),
        Leftover("--otlp-endpoint", ("http://x:4317",))]


@pytest.mark.parametrize("tokens", [["512"], ["-x"], ["--ok", "-x"]])
def test_a_stray_value_is_one_line(tokens):
    with pytest.raises(OptionsError, match="unrecognized argument"):
        split_flags(tokens)


def test_a_harmless_flag_is_a_warning_and_fp32_dtype_is_accepted():
    warnings = ignored_flags(["--json-output", "--dtype", "float32"])
    assert warnings == ["--json-output is a text-embeddings-inference flag autotune serve ignores",
                        "--dtype float32: autotune serves the profile's precision"]


@pytest.mark.parametrize("tokens", [["--dtype", "float16"], ["--pooling", "cls"], ["--revision=main"],
                                    ["--default-prompt", "query: "]])
def test_a_flag_that_changes_the_scores_is_refused(tokens):
    with pytest.raises(OptionsError, match="would change the scores"):
        ignored_flags(tokens)
