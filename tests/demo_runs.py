"""The demo agents' runs the protocol bridges' tests translate, one table for every bridge (AG-UI,
the AI SDK, the OpenAI routes): each agent of the demo once, with an input that takes it through
its crumbs (text, tools, a pause, a loop, a subagent and a task, a file)."""

DEMO_RUNS = [
    ("echo", "hello there"),
    ("writer", {"topic": "cats"}),
    ("interviewer", None),
    ("slow", {"count": 3, "delayMs": 0}),
    ("counter", {"until": 3}),
    ("manager", None),
    ("artist", None),
]
DEMO_IDS = [agent for agent, _ in DEMO_RUNS]

#: A text with every kind of character JSON escapes, or could: a frame template that splices a
#: delta in must write it as the bridge's encoder does.
ESCAPES = 'a "quoted" \\ line\nwith\ttabs, \u00e9t\u00e9 \u2028 \U0001f35e \x01'
#: The demo runs and an echo of :data:`ESCAPES`: what a bridge's frames are held to.
FRAMED_RUNS = [*DEMO_RUNS, ("echo", ESCAPES)]
FRAMED_IDS = [*DEMO_IDS, "echo-escapes"]
