"""Streaming a run: text deltas, tool calls and results as they happen, the partial structured
output while it streams, then the same result `run` gives."""

import asyncio

from pydantic import BaseModel

from dshkit.agent import Agent, tool
from dshkit.models import ScriptedModel, call


class Answer(BaseModel):
    city: str
    degrees: int


@tool
def temperature(city: str) -> int:
    """Today's temperature in a city."""
    return 21


def final_result_in_pieces(*pieces: str) -> list[dict[str, object]]:
    """A final answer whose arguments arrive in several deltas, as a real model streams them."""
    chunks: list[dict[str, object]] = [
        {"type": "tool_call_delta", "index": 0, "id": "f" if i == 0 else None, "name": "final_result" if i == 0 else None, "arguments": piece}
        for i, piece in enumerate(pieces)
    ]
    return chunks + [{"type": "finish", "reason": "tool_calls"}]


async def main() -> None:
    model = ScriptedModel([call("temperature", city="Oslo"), final_result_in_pieces('{"city": "Os', 'lo", "degr', 'ees": 21}')])
    agent = Agent(model, tools=[temperature])
    async with agent.run_stream("How warm is Oslo?", output_type=Answer) as stream:
        async for event in stream:
            if event.kind == "tool_call":
                print("calling", event.name)
            elif event.kind == "tool_result" and event.message is not None:
                print("result", event.message.content[0]["content"][0]["text"])
            elif event.kind == "output":
                print("partial", event.output)
        result = await stream.result()
    print("final", result.output)

    text_agent = Agent(ScriptedModel(["It is twenty-one degrees."]))
    async with text_agent.run_stream("And in words?") as stream:
        print("|".join([event.text async for event in stream if event.kind == "text"]))


asyncio.run(main())
