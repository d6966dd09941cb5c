"""Running a response's tool calls: the runner (segments, results in model order) and the gate (one
pass per call: arguments, schema, hooks and approval, body, post hooks). Private: tools are
defined with `dshkit.agent.Tool` / `@tool`."""
