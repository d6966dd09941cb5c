"""Structured output: a typed answer, validated; a failed answer goes back to the model naming
each failing path, and it tries again within `output_retries`."""

from dataclasses import dataclass

from dshkit.agent import Agent, OutputValidationError
from dshkit.models import ScriptedModel, call, output


@dataclass
class Forecast:
    city: str
    degrees: int
    summary: str


model = ScriptedModel([
    call("final_result", city="Oslo", degrees="warm"),  # wrong: degrees is no int, summary missing
    output(Forecast("Oslo", 21, "sunny")),
])
result = Agent(model).run_sync("Weather in Oslo?", output_type=Forecast)
print(result.output)
retry = model.requests[1].messages[-1].content[0]["content"][0]["text"]
print("\n".join(line for line in retry.splitlines() if line.startswith("- ")))

# Non-object types work too; they travel as {"response": ...}.
print(Agent(ScriptedModel([output([3, 1, 2])])).run_sync("Three numbers", output_type=list[int]).output)

try:
    Agent(ScriptedModel([call("final_result", city="Oslo")] * 3)).run_sync("Weather?", output_type=Forecast, output_retries=2)
except OutputValidationError as error:
    print("OutputValidationError:", error.problems)
