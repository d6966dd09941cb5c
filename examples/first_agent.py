"""A first agent: a typed tool, typed output, one call.

Runs offline with a scripted model; for a real one, replace the model, e.g.
`Agent("openai:gpt-4.1-mini")` with OPENAI_API_KEY set.
"""

from pydantic import BaseModel

from dshkit.agent import Agent, tool
from dshkit.models import ScriptedModel, call, output


class Sum(BaseModel):
    total: int
    explanation: str


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


model = ScriptedModel([call("add", a=2, b=3), output(Sum(total=5, explanation="2 + 3 = 5"))])
agent = Agent(model, tools=[add], system="Use the tools for arithmetic.")
result = agent.run_sync("What is 2 + 3?", output_type=Sum)
print(result.output)
print(f"{result.usage.requests} requests, {result.usage.tool_calls} tool call, status {result.status}")
