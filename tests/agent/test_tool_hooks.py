"""pre_tool / post_tool hooks: deny > ask > allow, failing closed, amending results, arguments untouched."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dshkit.agent import Agent, Allow, Amend, Ask, Deny, Tool
from dshkit.agent.tool_hooks import strictest
from dshkit.models import ScriptedModel


def drive(agent: Agent, message: Any) -> None:
    async def main() -> None:
        agent.followup(message)
        await agent.when_idle()

    asyncio.run(main())


def result_events(session: Any) -> list[Any]:
    return [e for e in session.events if e.type == "tool/result"]


def text(event: Any) -> str:
    return event.data["message"].content[0]["content"][0]["text"]


def echo_agent(kit: Any, hooks: dict[str, Any], ran: list[Any], *, arguments: str = '{"cmd": "ls"}', **options: Any) -> Agent:
    model = ScriptedModel([kit.calls_response(("c1", "sh", arguments)), "done"])
    return Agent(model, tools=[Tool("sh", "Shell.", {"type": "object"}, lambda a, c: ran.append(a) or "out")], hooks=hooks, **options)


def test_strictest_is_deny_then_ask_then_allow() -> None:
    assert strictest([Allow(), Ask("a"), Deny("d"), Ask("b")]) == Deny("d")
    assert strictest([Allow(), Ask("a"), Ask("b")]) == Ask("a")
    assert strictest([Allow(), Allow()]) == Allow()
    assert strictest([]) == Allow()
    assert strictest([Ask(None), Ask("why")]) == Ask("why")  # of one kind, the first with a reason


def test_a_deny_among_several_hooks_wins_and_the_body_does_not_run(kit: Any) -> None:
    ran: list[Any] = []
    agent = echo_agent(kit, {"pre_tool": [lambda ctx: Allow(), lambda ctx: Deny("no shell today"), lambda ctx: None]}, ran)
    drive(agent, kit.user("go"))
    assert ran == []
    (result,) = result_events(agent.session)
    assert result.data["error"] == {"name": "Denied", "code": "denied"}
    assert text(result) == "Tool call denied: no shell today. The tool did not run."


def test_an_ask_from_a_hook_waits_for_a_person_even_when_another_hook_allows(kit: Any) -> None:
    ran: list[Any] = []
    agent = echo_agent(kit, {"pre_tool": [lambda ctx: Allow(), lambda ctx: Ask("runs a command")]}, ran)

    async def main() -> None:
        agent.followup(kit.user("go"))
        while agent.status != "awaiting_approval":
            await asyncio.sleep(0)
        (pending,) = agent.pending_approvals()
        assert (pending.call_id, pending.tool, pending.reason) == ("c1", "sh", "runs a command")
        agent.approve("c1")
        await agent.when_idle()

    asyncio.run(main())
    assert ran == [{"cmd": "ls"}]


def test_a_hook_that_raises_denies_the_call(kit: Any) -> None:
    ran: list[Any] = []

    def broken(ctx: Any) -> Any:
        raise RuntimeError("policy server down")

    agent = echo_agent(kit, {"pre_tool": [lambda ctx: Allow(), broken]}, ran)
    drive(agent, kit.user("go"))
    assert ran == []
    (result,) = result_events(agent.session)
    assert result.data["error"]["code"] == "denied"
    assert "a pre_tool hook failed (RuntimeError: policy server down)" in text(result)


def test_a_hook_returning_something_else_denies(kit: Any) -> None:
    ran: list[Any] = []
    agent = echo_agent(kit, {"pre_tool": lambda ctx: True}, ran)
    drive(agent, kit.user("go"))
    assert ran == []
    assert "expected Allow(), Deny(reason), Ask(reason) or None, got bool" in text(result_events(agent.session)[0])


def test_hooks_see_frozen_arguments_so_history_audit_and_execution_agree(kit: Any) -> None:
    ran: list[Any] = []
    seen: list[Any] = []

    async def meddling(ctx: Any) -> None:  # async hooks work too
        seen.append((ctx.call_id, ctx.name, ctx.raw_arguments, ctx.turn, ctx.step))
        with pytest.raises(TypeError):
            ctx.arguments["cmd"] = "rm -rf /"  # type: ignore[index]

    agent = echo_agent(kit, {"pre_tool": meddling}, ran)
    drive(agent, kit.user("go"))
    assert seen == [("c1", "sh", '{"cmd": "ls"}', 1, 1)]
    assert ran == [{"cmd": "ls"}]
    (call,) = [e for e in agent.session.events if e.type == "tool/call"]
    assert call.data["arguments"] == '{"cmd": "ls"}'


def test_post_tool_hooks_replace_content_in_order_and_add_context(kit: Any) -> None:
    ran: list[Any] = []
    note = kit.context("the output was redacted")

    def redact(ctx: Any) -> Any:
        assert ctx.content == "out" and ctx.is_error is False
        return Amend("[redacted]", context=[note])

    def shout(ctx: Any) -> Any:
        return Amend(ctx.content.upper())

    agent = echo_agent(kit, {"post_tool": [redact, shout, lambda ctx: None]}, ran)
    drive(agent, kit.user("go"))
    (result,) = result_events(agent.session)
    assert text(result) == "[REDACTED]"
    users = [e.data for e in agent.session.events if e.type == "user/message"]
    assert note in users  # the added context entered at the next step


def test_a_post_tool_hook_that_raises_withholds_the_content(kit: Any) -> None:
    ran: list[Any] = []

    def broken(ctx: Any) -> Any:
        raise ValueError("scanner crashed")

    agent = echo_agent(kit, {"post_tool": broken}, ran)
    drive(agent, kit.user("go"))
    assert ran == [{"cmd": "ls"}]  # it ran
    (result,) = result_events(agent.session)
    assert result.data["error"]["code"] == "post_tool_failed"
    assert "out" not in text(result) and "scanner crashed" in text(result)


def test_hooks_are_checked_when_the_agent_is_built() -> None:
    with pytest.raises(TypeError, match=r"hooks\['pre_tool'\]\[1\]"):
        Agent(ScriptedModel([]), hooks={"pre_tool": [lambda ctx: None, "nope"]})


def secret_agent(kit: Any, post_tool: Any, meta: Any = None) -> Agent:
    from dshkit.agent import ToolOutput

    def leaky(arguments: Any, ctx: Any) -> Any:
        return ToolOutput("token=S3CRET", meta=meta if meta is not None else {"raw": "token=S3CRET", "rows": 1})

    model = ScriptedModel([kit.calls_response(("c1", "leaky", "{}")), "done"])
    return Agent(model, tools=[Tool("leaky", "Leaks.", {"type": "object"}, leaky)], hooks={"post_tool": post_tool})


def logged_result(agent: Agent) -> Any:
    (result,) = result_events(agent.session)
    assert "S3CRET" not in repr(result.data)  # nothing of the secret is logged, content or meta
    return result.data


def test_a_redaction_that_replaces_the_content_drops_the_meta_it_was_derived_from(kit: Any) -> None:
    seen: list[Any] = []

    def redact(ctx: Any) -> Any:
        seen.append(ctx.meta)
        return Amend(ctx.content.replace("S3CRET", "***"))

    agent = secret_agent(kit, redact)
    drive(agent, kit.user("go"))
    assert seen == [{"raw": "token=S3CRET", "rows": 1}]  # the hook saw the meta
    data = logged_result(agent)
    assert text_of(data) == "token=***" and "meta" not in data


def test_a_redaction_may_replace_the_meta_too_or_keep_it(kit: Any) -> None:
    agent = secret_agent(kit, lambda ctx: Amend("token=***", meta={**ctx.meta, "raw": "token=***"}))
    drive(agent, kit.user("go"))
    assert logged_result(agent)["meta"] == {"raw": "token=***", "rows": 1}

    agent = secret_agent(kit, lambda ctx: Amend("token=***", meta=ctx.meta), meta={"rows": 1})
    drive(agent, kit.user("go"))
    assert logged_result(agent)["meta"] == {"rows": 1}  # kept, as the hook asked


def test_a_hook_may_redact_the_meta_alone(kit: Any) -> None:
    def meta_only(ctx: Any) -> Any:
        return Amend(meta={"rows": ctx.meta["rows"]})

    agent = secret_agent(kit, [meta_only], meta={"raw": "token=S3CRET", "rows": 1})
    # the content still holds the secret here: this hook only cleans the meta
    drive(agent, kit.user("go"))
    (result,) = result_events(agent.session)
    assert result.data["meta"] == {"rows": 1} and text_of(result.data) == "token=S3CRET"


def test_a_failing_post_tool_hook_withholds_the_meta_too(kit: Any) -> None:
    def broken(ctx: Any) -> Any:
        raise RuntimeError("scanner crashed")

    agent = secret_agent(kit, broken)
    drive(agent, kit.user("go"))
    data = logged_result(agent)
    assert data["error"]["code"] == "post_tool_failed" and "meta" not in data


def test_an_amend_meta_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(TypeError, match="Amend meta"):
        Amend("x", meta=["not", "a", "mapping"])


def text_of(data: Any) -> str:
    return str(data["message"].content[0]["content"][0]["text"])
