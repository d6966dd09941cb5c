"""Tools: typed arguments checked before the body runs, a body's context, and a retry budget.

The model's first call has an invalid argument: the tool does not run, the model gets every
failing path back and calls again. A model that keeps getting it wrong ends the run with
`ToolRetriesExhausted`, naming the tool.
"""

from typing import Annotated

from pydantic import Field

from dshkit.agent import Agent, ToolContext, ToolRetriesExhausted, tool
from dshkit.models import ScriptedModel, call

NOTES = {"groceries": "milk, eggs", "work": "review PR 35"}


@tool(retries=1)
def read_note(name: str, max_chars: Annotated[int, Field(ge=1, le=100)] = 40) -> str:
    """Read a note by name."""
    return NOTES.get(name, "no such note")[:max_chars]


@tool
def whoami(ctx: ToolContext) -> str:
    """The call's own id and turn (a body may take a ToolContext)."""
    return f"call {ctx.call_id} in turn {ctx.turn}"


model = ScriptedModel([
    call("read_note", name="groceries", max_chars=500),  # refused: max_chars is over 100
    [call("read_note", name="groceries"), call("whoami", _id="w1")],
    "You need milk and eggs.",
])
result = Agent(model, tools=[read_note, whoami]).run_sync("What do I need to buy?")
for message in result.messages:
    if message.role == "user" and message.content[0]["type"] == "tool_result":
        print("tool result:", message.content[0]["content"][0]["text"].splitlines()[-1])
print("answer:", result.output)

stubborn = ScriptedModel([call("read_note", name=1)] * 2)
try:
    Agent(stubborn, tools=[read_note]).run_sync("Read note 1")
except ToolRetriesExhausted as error:
    print(f"{type(error).__name__}: tool {error.tool!r}, status {error.result.status if error.result else None}")
