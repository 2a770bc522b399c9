"""Errors in TEI's shape, so Hindsight's TEI client reads them as it reads TEI's."""

from __future__ import annotations

import json

import pytest

from autotune.serve.errors import STATUS, ApiError


@pytest.mark.parametrize(("error_type", "status"), sorted(STATUS.items()))
def test_each_error_type_has_its_status_and_teis_body(error_type, status):
    response = ApiError(error_type, "what went wrong").response()
    assert response.status_code == status
    assert json.loads(response.body) == {"error": "what went wrong", "error_type": error_type}
    assert "retry-after" not in response.headers


def test_a_refusal_says_when_to_come_back():
    response = ApiError("Overloaded", "the queue is full", retry_after=7).response()
    assert (response.status_code, response.headers["retry-after"]) == (429, "7")


def test_a_status_can_be_given_for_a_type():
    assert ApiError("Validation", "too large", status=413).response().status_code == 413
