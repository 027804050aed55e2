"""A chat agent with memory: the OpenAI SDK client wrapped with ``kredenc.wrap``.

Every ``chat.completions.create`` first recalls what the store knows that bears on the
last message (added to the request as a system message) and, after the reply, files
the user's message and the reply as turns of the session. The "model" here is the
scripted loopback server kredenc.testing ships (the real OpenAI protocol on 127.0.0.1),
so the example runs offline; point ``base_url`` at a real provider to use one.

    python examples/chat_agent.py [STORE_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import openai

import kredenc
from kredenc.testing.chat_server import chat_completions_route
from kredenc.testing.openai_server import LoopbackServer


def scripted_model(body: dict[str, Any]) -> str:
    """Answers from the memories the wrapper put into the request (as a model would)."""
    recalled = [m["content"] for m in body["messages"] if m["role"] == "system"]
    if any("jasmine tea" in text for text in recalled):
        return "You like jasmine tea in the morning."
    return "I don't know yet; tell me!"


def main(store: Path) -> None:
    with kredenc.Kredenc.open(store) as kb, LoopbackServer() as server:
        server.route("POST", "/v1/chat/completions", chat_completions_route(scripted_model))
        kb.remember("The user likes jasmine tea in the morning.", kind="preference")

        client = kredenc.wrap(
            openai.OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0),
            kb,
            session_id="example-chat",
        )
        with client:
            reply = client.chat.completions.create(
                model="scripted",
                messages=[{"role": "user", "content": "Which tea do I like in the morning?"}],
            )
        sent = server.requests[-1].json()["messages"]
        print("recalled into the request:")
        print("  " + sent[-1]["content"].replace("\n", "\n  "))
        print(f"reply: {reply.choices[0].message.content}")
        print(f"session turns filed: {len(kb.session_history('example-chat'))}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "store")
