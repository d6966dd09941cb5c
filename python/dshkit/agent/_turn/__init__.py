"""The engine of a turn: its steps, the step boundary, the model call and its stream cut by the
cancel token, stream assembly, and continuing a turn left waiting for approval. Private: reached
through `dshkit.agent.Agent`."""
