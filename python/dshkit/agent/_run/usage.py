"""`RunUsage`: a run's token usage, requests and tool calls, summed from its logged events (`run_usage`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from dshkit.models.stream_translation import usage_summary
from dshkit.session.events import ASSISTANT_MESSAGE, TOOL_CALL

if TYPE_CHECKING:
    from dshkit.session import Session


@dataclass(frozen=True)
class RunUsage:
    """Token usage of a run as the provider reported it, answered requests and tool calls run.

    `cost` (a `Decimal` in USD) is set when the optional `genai-prices` package
    (``pip install 'dshkit[prices]'``) knows every answering model, else None.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    requests: int = 0
    tool_calls: int = 0
    cost: Decimal | None = None

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


def run_usage(session: Session, seqs: range, output_name: str | None) -> RunUsage:
    """The usage of the events at `seqs` (calls of the final-answer tool `output_name` are not tool calls)."""
    events = session.events
    totals = {"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0}
    requests = tool_calls = 0
    priced: list[tuple[Mapping[str, Any], dict[str, int]]] = []
    for seq in seqs:
        event = events[seq]
        if event.type == ASSISTANT_MESSAGE:
            requests += 1
            usage = event.data.get("usage")
            if usage:
                summary = usage_summary(usage)
                for key in totals:
                    totals[key] += summary.get(key, 0)
                priced.append((event.data["message"].source, summary))
        elif event.type == TOOL_CALL and event.data["name"] != output_name:
            tool_calls += 1
    return RunUsage(
        totals["input_tokens"], totals["output_tokens"], totals["cached_input_tokens"], requests, tool_calls, _cost(priced)
    )


def _cost(priced: list[tuple[Mapping[str, Any], dict[str, int]]]) -> Decimal | None:
    """The price of the usages with `genai-prices`, if installed and it knows every model."""
    if not priced:
        return None
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    total = Decimal(0)
    for source, summary in priced:
        usage = Usage(
            input_tokens=summary.get("input_tokens", 0), output_tokens=summary.get("output_tokens", 0),
            cache_read_tokens=summary.get("cached_input_tokens") or None,
        )
        try:
            total += calc_price(usage, model_ref=str(source.get("model")), provider_id=str(source.get("provider"))).total_price
        except LookupError:
            return None  # a model it does not know: no cost rather than a wrong one
    return total


__all__ = ["RunUsage", "run_usage"]
