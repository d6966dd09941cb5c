"""`dshkit chat` asks at the terminal before a tool call that needs approval runs.

The call is shown (tool, arguments, the reason it asks), and the answer is ``y`` (run it once),
``n`` (deny it) or ``always`` (run it, and every later call of that tool in this session: the
agent logs the remembered policy). Anything else asks again; end of input or Ctrl-C denies.
"""

from __future__ import annotations

from typing import Any

PROMPT = "allow? [y]es / [n]o / [a]lways: "
_YES = frozenset(("y", "yes"))
_NO = frozenset(("n", "no"))
_ALWAYS = frozenset(("a", "always"))


def describe_call(pending: Any) -> str:
    """One line showing what the model wants to run, and why it needs a person."""
    reason = f" ({pending.reason})" if pending.reason else ""
    return f"[approval] {pending.tool} {pending.arguments}{reason}"


def apply_reply(agent: Any, pending: Any, reply: str | None) -> bool:
    """Decide `pending` from a typed reply; False when the reply means nothing (ask again).

    None (end of input, Ctrl-C) denies: nothing runs that a person did not allow.
    """
    if reply is None:
        agent.deny(pending.call_id, "no answer at the terminal")
        return True
    word = reply.strip().lower()
    if word in _YES:
        agent.approve(pending.call_id)
    elif word in _ALWAYS:
        agent.approve(pending.call_id, remember=True)
    elif word in _NO:
        agent.deny(pending.call_id, "denied at the terminal")
    else:
        return False
    return True


__all__ = ["PROMPT", "apply_reply", "describe_call"]
