"""One original-format log per feature of the format notes (each a function building an `OriginalLog`)."""

from __future__ import annotations

from collections.abc import Callable

from tests.session.dsh.original_logs import OriginalLog, assistant, tool_result, user

HEADER = {"header": {"config": {"provider": "deepseek-official", "model": "deepseek-v4-flash", "maxTokens": 4096, "reasoningEffort": "high"},
                     "system": "You are terse.", "tools": [{"name": "bash", "description": "run", "parameters": {"type": "object"}}]},
          "reason": "initial"}


def _turn_start(log: OriginalLog, turn: int, prompt: dict) -> int:
    log.event("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [prompt]})
    log.event("turn/start", {"turn": turn})
    log.event("agent/inbox/spliced", {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})
    log.event("step/start", {"turn": turn, "step": 1})
    seq = log.event("user/message", prompt, surfaceOp="append")
    log.event("session/title", {"title": "t", "messageSeqs": [seq], "source": {"kind": "fallback"}})
    log.event("request/header", HEADER)
    log.event("request/context", {"provider": "deepseek-official", "model": "deepseek-v4-flash"})
    return seq


def text_and_reasoning() -> OriginalLog:
    log = OriginalLog()
    _turn_start(log, 1, user("Reply PONG"))
    first = log.seq
    log.event("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "block-start", "index": 0, "blockType": "reasoning"}})
    log.packed("reasoning-chunks", 1, 1, 0, ["The", " user", " wants", " pong"])
    log.event("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "block-end", "index": 0}})
    log.packed("text-chunks", 1, 1, 1, ["PO", "NG", "."])
    reply = assistant({"type": "reasoning", "text": "The user wants pong"}, {"type": "text", "text": "PONG."})
    log.event("assistant/message", {"turn": 1, "step": 1, "message": reply,
                                    "usage": {"inputTokens": 3091, "outputTokens": 23, "cacheReadTokens": 0, "reasoningTokens": 20}},
              sourceEventSeqs=list(range(first, log.seq)), surfaceOp="append")
    log.event("step/end", {"turn": 1, "step": 1})
    log.event("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return log


def parallel_tools() -> OriginalLog:
    log = OriginalLog()
    _turn_start(log, 1, user("list and date"))
    log.packed("tool-call-chunks", 1, 1, 0, ['{"com', 'mand":', '"ls"}'], id="call_00_a", name="bash")
    calls = assistant({"type": "tool-call", "id": "call_00_a", "name": "bash", "arguments": '{"command":"ls"}'},
                      {"type": "tool-call", "id": "call_01_b", "name": "bash", "arguments": '{"command":"date"}'})
    log.event("assistant/message", {"turn": 1, "step": 1, "message": calls}, sourceEventSeqs=[log.seq - 1], surfaceOp="append")
    a = log.event("tool/call", {"turn": 1, "step": 1, "callId": "call_00_a", "name": "bash", "arguments": '{"command":"ls"}'})
    b = log.event("tool/call", {"turn": 1, "step": 1, "callId": "call_01_b", "name": "bash", "arguments": '{"command":"date"}'})
    log.event("tool/result", {"turn": 1, "step": 1, "message": tool_result("call_01_b", "Tue")}, sourceEventSeqs=[b], surfaceOp="append")
    log.event("tool/result", {"turn": 1, "step": 1, "message": tool_result("call_00_a", "a.txt", is_error=None), "meta": {"ms": 3}},
              sourceEventSeqs=[a], surfaceOp="append")
    log.event("step/end", {"turn": 1, "step": 1})
    log.event("step/start", {"turn": 1, "step": 2})
    log.event("request/header", HEADER | {"reason": "resume"})
    log.event("assistant/message", {"turn": 1, "step": 2, "message": assistant({"type": "text", "text": "done"})}, surfaceOp="append")
    log.event("step/end", {"turn": 1, "step": 2})
    log.event("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return log


def cancellation_and_max_tokens() -> OriginalLog:
    log = OriginalLog()
    _turn_start(log, 1, user("long essay"))
    log.event("assistant/message", {"turn": 1, "step": 1, "message": assistant(), "usage": {"inputTokens": 9, "outputTokens": 4096}},
              sourceEventSeqs=[], surfaceOp="append")
    log.event("step/end", {"turn": 1, "step": 1})
    log.event("turn/end", {"turn": 1, "reason": {"kind": "max-tokens"}})
    prompt = user("shorter")
    log.event("turn/start", {"turn": 2})
    log.event("step/start", {"turn": 2, "step": 1})
    log.event("user/message", prompt, surfaceOp="append")
    log.event("request/header", HEADER | {"reason": "change"})
    log.event("assistant/message", {"turn": 2, "step": 1, "message": assistant({"type": "text", "text": "Once"}), "interrupted": True},
              surfaceOp="append")
    log.event("step/end", {"turn": 2, "step": 1})
    log.event("turn/end", {"turn": 2, "reason": {"kind": "aborted", "reason": {"kind": "user"}}})
    log.event("turn/start", {"turn": 3})
    log.event("turn/end", {"turn": 3, "reason": {"kind": "error", "error": {"message": "boom", "code": "NETWORK", "status": 503}}})
    return log


def compaction_and_inbox() -> OriginalLog:
    log = OriginalLog()
    first = _turn_start(log, 1, user("first question"))
    answer = log.event("assistant/message", {"turn": 1, "step": 1, "message": assistant({"type": "text", "text": "first answer"})},
                       surfaceOp="append")
    log.event("step/end", {"turn": 1, "step": 1})
    log.event("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    steer = user("and also this")
    log.event("agent/inbox/spliced", {"target": "next-step", "start": 0, "inserted": [steer]})
    log.event("turn/start", {"turn": 2})
    log.event("agent/inbox/spliced", {"target": "next-step", "start": 0, "removedCount": 1, "inserted": [], "outcome": "canceled"})
    log.event("compaction/start", {"compactionId": "cmp-1", "turn": 2})
    summary_request = log.event("compaction/summary", {"compactionId": "cmp-1", "shadowedRange": {"start": first, "end": answer},
                                                       "shadowedSeqs": [first, answer], "shadowedTokenCount": 266,
                                                       "provider": "deepseek-official", "model": "deepseek-v4-flash", "maxTokens": 32})
    summary = user("Summary: one question answered.", source={"kind": "plugin", "plugin": "compact", "compactionId": "cmp-1"})
    log.event("user/message", summary, sourceEventSeqs=[summary_request, first, answer],
              surfaceOp={"op": "replace", "start": first, "end": answer})
    log.event("compaction/end", {"compactionId": "cmp-1", "turn": 2})
    log.event("step/start", {"turn": 2, "step": 1})
    log.event("user/message", user("next"), surfaceOp="append")
    log.event("request/header", HEADER | {"reason": "resume"})
    log.event("assistant/message", {"turn": 2, "step": 1, "message": assistant({"type": "tool-call", "id": "c9", "name": "bash", "arguments": "{}"})},
              surfaceOp="append")
    call = log.event("tool/call", {"turn": 2, "step": 1, "callId": "c9", "name": "bash", "arguments": "{}"})
    result = tool_result("c9", "x" * 400)
    original = log.event("tool/result", {"turn": 2, "step": 1, "message": result}, sourceEventSeqs=[call], surfaceOp="append")
    pruned = {**result, "content": [{**result["content"][0], "content": [{"type": "text", "text": "[pruned]"}]}]}
    log.event("compaction/prune", {"compactionId": "cmp-2", "seqs": [original]})
    log.event("tool/result", {"turn": 2, "step": 1, "message": pruned}, sourceEventSeqs=[original],
              surfaceOp={"op": "replace", "start": original, "end": original})
    log.event("step/end", {"turn": 2, "step": 1})
    log.event("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    return log


def fork_seed_and_unknown() -> OriginalLog:
    log = OriginalLog(parentSession="b3a1c0de-0000-4000-8000-000000000001", seedLength=5, origin="subagent", delegationDepth=1)
    prompt = user("seeded")
    log.event("turn/start", {"turn": 1})
    log.event("step/start", {"turn": 1, "step": 1})
    log.event("user/message", prompt, surfaceOp="append")
    log.event("step/end", {"turn": 1, "step": 1})
    log.event("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    log.event("session/end-seed", {})
    log.event("approval/asked", {"requestId": "r1", "tool": "bash"})
    log.event("hook/invoked", {"hook": "pre-step"})
    log.event("future/thing", {"detail": 1}, ignorable=True)
    log.event("turn/start", {"turn": 2})
    log.event("step/start", {"turn": 2, "step": 1})
    log.event("user/message", user("after the seed"), surfaceOp="append")
    log.event("request/header", HEADER)
    log.event("assistant/message", {"turn": 2, "step": 1, "message": assistant({"type": "text", "text": "ok"})}, surfaceOp="append")
    log.event("step/end", {"turn": 2, "step": 1})
    log.event("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    return log


def crashed_turn() -> OriginalLog:
    """A turn cut by a crash: one call started (outcome unknown), one never started."""
    log = OriginalLog()
    _turn_start(log, 1, user("do two things"))
    log.event("assistant/message", {"turn": 1, "step": 1, "message": assistant(
        {"type": "tool-call", "id": "call_a", "name": "bash", "arguments": "{}"},
        {"type": "tool-call", "id": "call_b", "name": "bash", "arguments": "{}"})}, surfaceOp="append")
    log.event("tool/call", {"turn": 1, "step": 1, "callId": "call_a", "name": "bash", "arguments": "{}"})
    return log


PIXEL = bytes.fromhex("89504e470d0a1a0a") + b"a red pixel, as the test writes it"
SCREENSHOT = bytes.fromhex("89504e470d0a1a0a") + b"a screenshot the read-image tool returned"


def images() -> OriginalLog:
    """A prompt with an image, and a tool whose result is an image (both by attachment reference)."""
    log = OriginalLog()
    prompt = user("What is this?")
    prompt["content"] = [{"type": "text", "text": "Inspect this image "}, log.image(PIXEL, name="red.png"), {"type": "text", "text": "then read the screen."}]
    _turn_start(log, 1, prompt)
    call = assistant({"type": "tool-call", "id": "call_00_img", "name": "read_image", "arguments": '{"path":"s.png"}'})
    log.event("assistant/message", {"turn": 1, "step": 1, "message": call}, surfaceOp="append")
    seq = log.event("tool/call", {"turn": 1, "step": 1, "callId": "call_00_img", "name": "read_image", "arguments": '{"path":"s.png"}'})
    result = tool_result("call_00_img", "s.png:")
    result["content"][0]["content"].append(log.image(SCREENSHOT, media_type="image/png"))
    log.event("tool/result", {"turn": 1, "step": 1, "message": result}, sourceEventSeqs=[seq], surfaceOp="append")
    log.event("step/end", {"turn": 1, "step": 1})
    log.event("step/start", {"turn": 1, "step": 2})
    log.event("assistant/message", {"turn": 1, "step": 2, "message": assistant({"type": "text", "text": "A red pixel."})}, surfaceOp="append")
    log.event("step/end", {"turn": 1, "step": 2})
    log.event("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return log


SCENARIOS: dict[str, Callable[[], OriginalLog]] = {
    "text_and_reasoning": text_and_reasoning,
    "parallel_tools": parallel_tools,
    "cancellation_and_max_tokens": cancellation_and_max_tokens,
    "compaction_and_inbox": compaction_and_inbox,
    "fork_seed_and_unknown": fork_seed_and_unknown,
    "images": images,
}
