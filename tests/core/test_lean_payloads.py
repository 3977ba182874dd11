"""Payloads leave out the nulls of durable-agent's models, and read back the same.

The converter (``durable_agent._payloads.storage``) is only safe while no field's ``None``
means something other than its default; these tests hold every model of the package
to that, and check the two fields that keep their null themselves by effect: an
endpoint without a key still has none after a trip through history."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import types
import typing
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from temporalio.contrib.pydantic import pydantic_data_converter

import activities
import durable_agent
import workflows
from durable_agent._contracts.boundary import (
    ModelCallInput,
    ModelSetup,
    StoredMessageRef,
    StoreTranscriptInput,
    ToolCallInput,
)
from durable_agent._payloads.storage import OWN_MODULES, lean_data_converter
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._wire.messages import ToolMessage, UserMessage
from durable_agent._wire.options import ModelOptions, ReasoningWire
from durable_agent._wire.transcript import content_hash

#: The fields whose ``None`` is not their default; each keeps it with ``nulls_kept``.
NULLS_KEPT = {("ProviderEndpoint", "api_key_env"), ("ReasoningWire", "field")}


def _models() -> set[type[BaseModel]]:
    found: set[type[BaseModel]] = set()
    for package in (durable_agent, workflows, activities):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if module.name.endswith("__main__"):  # runs the command line when imported
                continue
            for obj in vars(importlib.import_module(module.name)).values():
                own = inspect.isclass(obj) and obj.__module__.startswith(OWN_MODULES)
                if own and issubclass(obj, BaseModel):
                    found.add(obj)
    return found


def _nullable(annotation: Any) -> bool:
    if annotation is type(None):
        return True
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and any(
        _nullable(a) for a in typing.get_args(annotation)
    )


def test_no_model_has_a_null_that_is_not_its_default_unless_it_keeps_it() -> None:
    models = _models()
    assert len(models) > 100  # the scan found the package's models
    meaningful = {
        (model.__name__, name)
        for model in models
        for name, field in model.model_fields.items()
        if _nullable(field.annotation)
        and not field.is_required()
        and field.get_default(call_default_factory=True) is not None
    }
    assert meaningful == NULLS_KEPT, (
        "a field whose None is not its default would read back as the default once "
        "payloads leave nulls out: keep it with contract_base.nulls_kept and list it here"
    )


def _trip(value: Any) -> tuple[Any, int]:
    (payload,) = lean_data_converter.payload_converter.to_payloads([value])
    (back,) = lean_data_converter.payload_converter.from_payloads([payload], [type(value)])
    return back, len(payload.data)


def test_an_endpoint_without_a_key_keeps_none_through_history() -> None:
    endpoint = ProviderEndpoint(base_url="http://127.0.0.1:9", api_key_env=None)
    setup = ModelSetup(
        endpoint=endpoint,
        model="m",
        options=ModelOptions(),
        reasoning=ReasoningWire(field=None),
        stream=True,
    )
    call = ModelCallInput(
        turn=1, setup_digest="d", setup=setup, messages=[UserMessage(content="hi")], head="h"
    )
    back, _ = _trip(call)
    assert back == call
    assert back.setup.target.api_key_env is None  # not the default OPENAI_API_KEY
    assert back.setup.reasoning.field is None


def test_a_tool_call_and_its_result_are_smaller_and_read_back_the_same() -> None:
    call = ToolCallInput(
        turn=2,
        slot=1,
        tool_name="lookup",
        tool_call_id="call_1",
        arguments='{"key": 3}',
        max_result_chars=100_000,
    )
    result = ToolMessage(tool_call_id="call_1", content="value 3", tool_name="lookup")
    for value in (call, result):
        back, lean = _trip(value)
        assert back == value
        (full,) = pydantic_data_converter.payload_converter.to_payloads([value])
        assert lean < len(full.data)
        assert b"null" not in lean_data_converter.payload_converter.to_payloads([value])[0].data


class Owned(BaseModel):
    """The owner's model, where None is not the default: converted as temporalio does."""

    limit: int | None = 5


def test_the_owners_models_keep_their_nulls() -> None:
    back, _ = _trip(Owned(limit=None))
    assert back.limit is None


def test_messages_and_references_read_back_as_what_they_are() -> None:
    """A piece of the array mixes messages and tool results by reference: each reads
    back as its own kind, written as before (a reference is ``{"stored": ...}``)."""
    result = ToolMessage(tool_call_id="call_1", content="value 3", tool_name="lookup")
    reference = StoredMessageRef(stored=content_hash(result))
    piece = StoreTranscriptInput(messages=[UserMessage(content="hi"), reference, result], head="v1")
    back, _ = _trip(piece)
    assert back == piece
    assert [type(m) for m in back.messages] == [UserMessage, StoredMessageRef, ToolMessage]
    (data,) = lean_data_converter.payload_converter.to_payloads([piece])
    assert json.loads(data.data)["messages"][1] == {"stored": content_hash(result)}
    raw = {"messages": [{"stored": "abc"}, {"role": "user", "content": "x"}], "head": "v1"}
    read = StoreTranscriptInput.model_validate(raw)
    assert isinstance(read.messages[0], StoredMessageRef) and read.messages[0].stored == "abc"
    assert isinstance(read.messages[1], UserMessage)
    with pytest.raises(ValidationError, match="role"):
        StoreTranscriptInput.model_validate({"messages": [{"content": "x"}], "head": "v1"})


def test_no_model_requires_a_field_that_may_be_null() -> None:
    """A required field that may be ``None`` does not read back once payloads leave its
    null out (an escalation without a notifier did not reach its activity): it needs a
    ``None`` default, or to keep its null with ``nulls_kept``."""
    required = {
        (model.__name__, name)
        for model in _models()
        for name, field in model.model_fields.items()
        if _nullable(field.annotation) and field.is_required()
    }
    assert required <= NULLS_KEPT, sorted(required - NULLS_KEPT)
