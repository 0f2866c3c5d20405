"""Use bread_sync's agents as OpenAI models, with the official ``openai`` Python client: list
them, chat with echo (whole, then streamed), ask it through the Responses API, and answer the
writer's pause with the next message on its session.

    .venv/bin/pip install -q openai && .venv/bin/bread-sync start   # in one terminal
    .venv/bin/python examples/openai_client.py                     # in another

`BREAD_URL` names another server (default http://127.0.0.1:3000); the OpenAI routes are its
`/v1`. `BREAD_API_KEY` is the key the server's auth plugin takes, if it has one (the demo,
serving only this machine, takes any).
"""

from __future__ import annotations

import os

from openai import OpenAI

BASE = os.environ.get("BREAD_URL", "http://127.0.0.1:3000")
client = OpenAI(base_url=f"{BASE}/v1", api_key=os.environ.get("BREAD_API_KEY", "unused"))

print("models:", " ".join(model.id for model in client.models.list()))

completion = client.chat.completions.create(
    model="echo", messages=[{"role": "user", "content": "hello from the OpenAI client"}]
)
print("chat:", completion.choices[0].message.content)

stream = client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "one two three"}],
                                        stream=True)  # fmt: skip
print("stream:", "|".join(chunk.choices[0].delta.content for chunk in stream if chunk.choices[0].delta.content))

response = client.responses.create(model="echo", input="a response")
print("responses:", response.output_text)

# The writer asks before it publishes: the answer ends with its question, and the `bread` field
# (an extension the client keeps) says the run is paused, on which session, at which checkpoint.
paused = client.chat.completions.create(model="writer", messages=[{"role": "user", "content": "sourdough"}])
print("writer:", paused.choices[0].message.content.replace("\n\n", " / "))
print("bread:", paused.bread["status"], paused.bread["checkpoint"]["kind"], paused.bread["checkpoint"]["toolName"])
answer = client.chat.completions.create(
    model="writer",
    messages=[{"role": "user", "content": "yes"}],
    extra_headers={"Bread-Session-Id": paused.bread["sessionId"]},  # the next message on the session answers
)
print("answered:", answer.choices[0].message.content)
