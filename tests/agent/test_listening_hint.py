"""`NotificationHub.maybe_listening`: the cheap hint the agent loop reads before each `emit`. It may lag
behind a stream the collector dropped, never behind a new listener."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from dshkit.agent import Agent
from dshkit.agent.notifications import NotificationHub
from dshkit.models import ScriptedModel


def test_the_listening_hint_is_never_false_while_anyone_listens() -> None:
    hub = NotificationHub()
    assert not hub.maybe_listening and not hub.active
    seen: list[str] = []
    unsubscribe = hub.subscribe(lambda event: seen.append(event.type))
    assert hub.maybe_listening and hub.active
    hub.emit("turn_start", turn=1)
    unsubscribe()
    hub.emit("turn_end", turn=1)  # nobody left: this emit clears the hint
    assert seen == ["turn_start"] and not hub.maybe_listening
    stream = hub.stream()
    assert hub.maybe_listening
    del stream
    gc.collect()
    assert not hub.active and hub.maybe_listening  # a stream dropped by the collector leaves it set ...
    hub.emit("turn_start", turn=2)
    assert not hub.maybe_listening  # ... until the next emit finds nobody


def test_a_subscriber_added_between_turns_gets_every_event_of_the_next_turn(kit: Any) -> None:
    agent = Agent(ScriptedModel(["first", "second"]))
    seen: list[str] = []

    async def main() -> None:
        agent.followup(kit.user("one"))
        await agent.when_idle()
        assert not agent._hub.maybe_listening  # nobody listened: the loop skipped every emit
        agent.subscribe(lambda event: seen.append(event.type))
        agent.followup(kit.user("two"))
        await agent.when_idle()

    asyncio.run(main())
    assert seen[0] == "inserted" and seen[-1] == "turn_end"
    assert {"turn_start", "step_start", "request", "delta", "message", "step_end"} <= set(seen)
