"""Compaction: when the history nears the context window, the oldest part is summarized (a new
message with a new id) and the run goes on; the log keeps everything that was replaced."""

from dshkit.agent import Agent, Compaction
from dshkit.models import ScriptedModel

model = ScriptedModel([
    "word " * 1000,                                 # a long first answer (~1,250 tokens)
    "The user asked for many words and got them.",  # the summary: the agent's own model writes it
    "Done.",
])
agent = Agent(model, compaction=Compaction(context_window=2000, threshold=0.5, keep_recent_tokens=100))
agent.run_sync("Write many words.")
print("tokens before:", agent.tokens)
result = agent.run_sync("Now stop.")
print("answer:", result.output, "- tokens after:", agent.tokens)
print([event.type for event in agent.session.events if event.type.startswith("compaction/")])
print("first message now:", agent.session.messages()[0].source["kind"])
