"""The agent's input: the inbox of queued messages (changed only through durable splice events)
and the checks on the messages the agent is handed. Private: reached through `Agent.followup`,
`steer`, `inject` and `Agent.inbox`."""
