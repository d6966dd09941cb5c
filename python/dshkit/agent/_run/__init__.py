"""A run while its turn goes on (`Agent.run`): its state, limits and structured output. Private:
reached through `Agent.run`, `run_sync` and `run_stream`."""
