"""`pre_step` admission: the hook rejects the claimed batch or enters the batch the next step logs."""

from __future__ import annotations

from dshkit.agent._input.checks import check_rewrite, check_user_message
from dshkit.agent._input.inbox import Inbox
from dshkit.agent._turn.state import Admitted, Turn, TurnAborted
from dshkit.agent._user_code import call_sync_or_async
from dshkit.agent.hooks import Enter, Hook, PreStepContext, Reject
from dshkit.llm import Message
from dshkit.session import Session


async def admit(
    turn: Turn, claimed: list[tuple[Message, int]], hook: Hook, session: Session, inbox: Inbox
) -> list[Admitted] | None:
    """Run the `pre_step` hook over the claimed batch; the final batch with the seqs each cites.

    A claimed message may enter as is or rewritten (`check_rewrite`); any other message is
    added context and needs an id new to the session. Returns None when the hook rejected
    (the turn then ends ``blocked``).
    """
    messages = tuple(message for message, _ in claimed)
    ctx = PreStepContext(messages, turn.number, turn.step + 1, turn.token, session)
    result = await call_sync_or_async(hook, ctx)
    if turn.token.cancelled:
        raise TurnAborted
    if isinstance(result, Reject):
        turn.reason = {"kind": "blocked"} if result.reason is None else {"kind": "blocked", "message": result.reason}
        return None
    if not isinstance(result, Enter):
        raise TypeError(f"pre_step hook: expected Enter(messages) or Reject(), got {type(result).__name__}")
    claims = {message.id: (message, seq) for message, seq in claimed}
    seen: set[str] = set()
    batch: list[Admitted] = []
    for index, message in enumerate(result.messages):
        where = f"pre_step Enter messages[{index}]"
        check_user_message(message, where)
        if message.id in seen:
            raise ValueError(f"{where}: message id {message.id} appears twice in the batch")
        seen.add(message.id)
        claim = claims.get(message.id)
        if claim is not None:
            original, seq = claim
            check_rewrite(original, message, where, held="claimed")
            batch.append((message, (seq,)))
        else:
            if inbox.knows(message.id):
                raise ValueError(
                    f"{where}: added context needs an id new to the session; {message.id} is already "
                    "pending or logged (create a new message for added context)"
                )
            batch.append((message, ()))
    return batch


__all__ = ["admit"]
