"""Every WireConformance.toRequest and Processor vector, compared as JSON."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.adapter import load_vectors, process, process_stream, to_request
from tests.conformance.waivers import WAIVERS, waived_expected

REQUEST_VECTORS = load_vectors("WireConformance", ("toRequest",))
PROCESS_VECTORS = load_vectors("Processor", ("process",))
STREAM_VECTORS = load_vectors("Processor", ("processStream",))


def test_vector_counts_match_the_published_file() -> None:
    # Guards against the adapter silently loading fewer vectors than shared/ holds.
    assert (len(REQUEST_VECTORS), len(PROCESS_VECTORS), len(STREAM_VECTORS)) == (28, 21, 2)


@pytest.mark.parametrize("vector", REQUEST_VECTORS, ids=lambda v: v["name"])
def test_to_request(vector: dict[str, Any]) -> None:
    key = f"WireConformance.toRequest/{vector['name']}"
    expected = vector["expected"]["request_body"]
    if key in WAIVERS:
        expected = waived_expected(key, expected)
    assert to_request(vector["input"]) == expected


@pytest.mark.parametrize("vector", PROCESS_VECTORS, ids=lambda v: v["name"])
def test_process(vector: dict[str, Any]) -> None:
    assert process(vector["input"]) == vector["expected"]["result"]


@pytest.mark.parametrize("vector", STREAM_VECTORS, ids=lambda v: v["name"])
def test_process_stream(vector: dict[str, Any]) -> None:
    assert process_stream(vector["input"]) == vector["expected"]


def test_every_waiver_names_a_real_vector_and_still_differs() -> None:
    names = {f"WireConformance.toRequest/{v['name']}": v for v in REQUEST_VECTORS}
    for key, reason in WAIVERS.items():
        assert key in names, f"waiver {key} names no vector"
        assert len(reason) > 40
        vector = names[key]
        # A waiver that no longer differs must be removed.
        assert to_request(vector["input"]) != vector["expected"]["request_body"]
