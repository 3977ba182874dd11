"""temporalio's pydantic converter, leaving out the nulls of durable-agent's own models.

Every activity input and result stays in history for the life of the session, and
most of their optional fields are unset: a tool call's input and its result carried
``"approval":null,"target":null,...`` in every one, a tenth of a session's history.
Left out, they read back the same, as the field's default is ``None``: a test checks
that of every model in the package, and the two fields whose ``None`` means something
else put it back themselves (``contract_base.nulls_kept``). Messages were already
stored this way (``transcript.canonical_json``). Values of other types, the owner's
own models among them, are converted exactly as temporalio does; reading is
unchanged, so payloads written either way read back alike.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, PydanticPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)

#: Whose models lose their nulls: the package's own, by module.
OWN_MODULES = ("durable_agent.", "workflows.", "activities.")


class LeanJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """JSON by pydantic, without the null fields of durable-agent's models."""

    def to_payload(self, value: Any) -> Payload | None:
        if isinstance(value, BaseModel) and type(value).__module__.startswith(OWN_MODULES):
            data = to_json(value, exclude_none=True)
            return Payload(metadata={"encoding": self.encoding.encode()}, data=data)
        return super().to_payload(value)


#: One for the process: temporalio makes a payload converter for every workflow run and
#: twice for every activation, and a fresh JSON converter would build its serializer and
#: empty its cache of type adapters (a schema built again per run) each time.
_CONVERTERS = tuple(
    LeanJSONPayloadConverter() if isinstance(c, JSONPlainPayloadConverter) else c
    for c in DefaultPayloadConverter.default_encoding_payload_converters
)


class LeanPayloadConverter(PydanticPayloadConverter):
    """``PydanticPayloadConverter`` with ``LeanJSONPayloadConverter`` for JSON."""

    def __init__(self) -> None:
        CompositePayloadConverter.__init__(self, *_CONVERTERS)


lean_data_converter = DataConverter(payload_converter_class=LeanPayloadConverter)
"""What the workers and clients of durable-agent convert payloads with."""
