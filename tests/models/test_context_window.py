"""An HTTP model's `context_window=` is the window `Compaction` measures against when given none."""

from __future__ import annotations

import pytest

from dshkit.agent import Agent, Compaction
from dshkit.models import Provider
from dshkit.models.anthropic.model import AnthropicModel
from dshkit.models.chat.model import OpenAICompatibleModel
from dshkit.models.responses.model import OpenAIResponsesModel

MODELS = [
    lambda **kw: OpenAICompatibleModel("m", Provider("http://127.0.0.1:9/v1", api_key="k"), **kw),
    lambda **kw: AnthropicModel("m", Provider("http://127.0.0.1:9", api_key="k"), **kw),
    lambda **kw: OpenAIResponsesModel("m", Provider("http://127.0.0.1:9/v1", api_key="k"), **kw),
]


@pytest.mark.parametrize("make", MODELS)
def test_compaction_takes_the_models_window_when_given_none(make: object) -> None:
    model = make(context_window=64_000)  # type: ignore[operator]
    assert model.context_window == 64_000
    assert Agent(model, compaction=Compaction()).context_window == 64_000
    assert Agent(model, compaction=Compaction(context_window=8_000)).context_window == 8_000


@pytest.mark.parametrize("make", MODELS)
def test_without_a_window_the_model_says_none(make: object) -> None:
    assert make().context_window is None  # type: ignore[operator]


@pytest.mark.parametrize("make", MODELS)
@pytest.mark.parametrize("bad", [0, -5, True, 1.5, "128k"])
def test_a_bad_window_is_refused_by_name(make: object, bad: object) -> None:
    with pytest.raises(ValueError, match=r"context_window: expected an int >= 1"):
        make(context_window=bad)  # type: ignore[operator]
