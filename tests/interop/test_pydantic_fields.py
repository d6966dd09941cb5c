"""`Message` and `FrozenDict` as pydantic v2 field types, and in a FastAPI endpoint."""

from __future__ import annotations

import pytest

pydantic = pytest.importorskip("pydantic")

import dshkit  # noqa: E402
from dshkit import FrozenDict, Message  # noqa: E402


class Envelope(pydantic.BaseModel):
    message: Message
    history: list[Message] = []
    meta: FrozenDict[str] = FrozenDict()


def _message() -> Message:
    return dshkit.create_assistant_message(
        [{"type": "text", "text": "hi"}, {"type": "tool_call", "id": "c", "name": "f", "arguments": "{}"}], provider="p", model="m"
    )


def test_validates_from_a_mapping_and_json_keeping_the_id() -> None:
    message = _message()
    model = Envelope.model_validate({"message": message.to_dict(), "meta": {"tags": ["a"]}})
    assert model.message == message and type(model.message) is Message
    assert model.meta == {"tags": ("a",)} and type(model.meta) is FrozenDict
    again = Envelope.model_validate_json(model.model_dump_json())
    assert again == model and again.message.id == message.id
    assert Envelope(message=message).message is message  # a Message is taken as it is


def test_serialises_to_plain_data() -> None:
    message = _message()
    dumped = Envelope(message=message, meta=FrozenDict({"k": 1})).model_dump()
    assert dumped == {"message": message.to_dict(), "history": [], "meta": {"k": 1}}
    assert type(dumped["meta"]) is dict


def test_json_schema_describes_the_four_fields() -> None:
    schema = Envelope.model_json_schema()
    message = schema["properties"]["message"]
    assert set(message["properties"]) == {"id", "role", "content", "source"}
    assert message["properties"]["role"]["enum"] == ["system", "user", "assistant"]
    assert schema["properties"]["meta"]["type"] == "object"


def test_bad_input_is_a_validation_error_naming_the_field() -> None:
    with pytest.raises(pydantic.ValidationError, match=r"message\n  not a dshkit message: id: the message has no id"):
        Envelope.model_validate({"message": {"role": "user", "content": "x", "source": {"kind": "user"}}})
    with pytest.raises(pydantic.ValidationError, match=r"meta\n  not a frozen JSON object: .*set is not a JSON value"):
        Envelope.model_validate({"message": _message(), "meta": {"s": {1, 2}}})
    with pytest.raises(pydantic.ValidationError, match="must be a Message or a mapping, not int"):
        Envelope.model_validate({"message": 3})


def test_fastapi_endpoint_takes_and_returns_messages() -> None:
    fastapi = pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    app = fastapi.FastAPI()

    @app.post("/reply")
    def reply(history: list[Message]) -> list[Message]:
        answer = dshkit.create_assistant_message(f"seen {len(history)}", provider="p", model="m")
        return [*history, answer]

    client = TestClient(app)
    question = dshkit.create_user_message("q", source={"kind": "user"})
    response = client.post("/reply", json=[question.to_dict()])
    assert response.status_code == 200
    body = response.json()
    assert body[0] == question.to_dict() and body[1]["content"] == [{"type": "text", "text": "seen 1"}]
    assert client.post("/reply", json=[{"role": "user"}]).status_code == 422
    openapi = client.get("/openapi.json")
    assert openapi.status_code == 200 and '"enum":["system","user","assistant"]' in openapi.text.replace(" ", "")
