"""`dshkit.interop`: dshkit messages in other SDKs' formats, one module per format.

`openai_chat`, `openai_responses`, `anthropic`, `langchain`, `pydantic_ai` convert both ways;
`openai_agents` is an OpenAI Agents SDK session over a dshkit log; `pydantic` holds the schema
behind `Message` and `FrozenDict` as pydantic field types. Each imports its SDK lazily (nothing
is imported here). See ``docs/interop.md``.
"""
