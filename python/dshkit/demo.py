"""`dshkit demo`: an offline walk through what dshkit guarantees, with real output."""

from __future__ import annotations

import argparse
import json

import dshkit


def show_message_core() -> None:
    """Creation, import, a same-id rewrite, serialisation, and a refused mutation."""
    print("== Messages are identified immutable values ==")
    prompt = dshkit.create_user_message("List the files, please.", source={"kind": "user"})
    print(f"created   {prompt.id}  role={prompt.role}  text={prompt.text!r}")

    imported = dshkit.freeze_message(
        {
            "id": "imported-7f3a",
            "role": "user",
            "content": [{"type": "text", "text": "a message from another system"}],
            "source": {"kind": "user"},
        }
    )
    print(f"imported  {imported.id}  (the id is kept verbatim)")

    rewritten = prompt.with_content("List the files in the workspace, please.")
    print(f"rewritten {rewritten.id}  same id: {rewritten.id == prompt.id}  text={rewritten.text!r}")

    text = prompt.to_json()
    print(f"json      {text}")
    print(f"reloaded  equal: {dshkit.Message.from_json(text) == prompt}")

    try:
        prompt.content[0]["text"] = "changed"  # type: ignore[index]
    except TypeError as error:
        print(f"mutation  refused: TypeError: {error}")
    try:
        dshkit.create_user_message("x", source={"kind": "user"}, id="mine")  # type: ignore[call-arg]
    except TypeError as error:
        print(f"forged id refused: TypeError: {error}")
    print(json.dumps(dshkit.thaw(prompt.source)))


def main(args: argparse.Namespace) -> int:
    """Run the demonstration; returns the exit code."""
    show_message_core()
    return 0
