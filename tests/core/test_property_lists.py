"""Schemas written as property lists (an agent file's inputs and outputs) are read as
JSON Schema by the spec itself: ``output_schema`` and a sub-agent's ``inputs``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from durable_agent._spec.document import AgentSpec, schema_from_properties

OUTPUTS = [
    {"name": "city", "kind": "string", "description": "where", "required": True},
    {"name": "days", "kind": "array", "items": {"kind": "integer"}},
    {"name": "unit", "kind": "string", "enumValues": ["C", "F"], "required": True},
]


def test_a_property_list_is_the_schema_it_describes() -> None:
    assert schema_from_properties(OUTPUTS) == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "where"},
            "days": {"type": "array", "items": {"type": "integer"}},
            "unit": {"type": "string", "enum": ["C", "F"]},
        },
        "required": ["city", "unit"],
    }


def test_a_spec_takes_property_lists_for_its_output_and_its_sub_agents_inputs() -> None:
    spec = AgentSpec.model_validate(
        {
            "model": {"name": "m"},
            "output_schema": OUTPUTS,
            "agents": [
                {
                    "name": "forecaster",
                    "description": "forecasts",
                    "spec": {"model": {"name": "m"}},
                    "inputs": [{"name": "city", "kind": "string", "required": True}],
                }
            ],
        }
    )
    assert spec.output_schema == schema_from_properties(OUTPUTS)
    assert spec.agents[0].inputs == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }


def test_an_unknown_kind_is_named() -> None:
    with pytest.raises(ValidationError, match="unknown kind 'date'"):
        AgentSpec.model_validate(
            {"model": {"name": "m"}, "output_schema": [{"name": "when", "kind": "date"}]}
        )
