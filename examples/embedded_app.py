"""An existing Flask app that mounts the bread API under /bread, beside its own routes.

    BREAD_DB=/tmp/embedded.db .venv/bin/flask --app examples/embedded_app.py run --port 5000
    curl -sN http://127.0.0.1:5000/bread/agents/echo/run -d '{"input": "hi"}'
    curl -s http://127.0.0.1:5000/            # the app's own route, untouched

The body limit and the loopback rule apply to the /bread routes only.
"""

from flask import Flask

from bread_sync import create_bread
from bread_sync.demo import config
from bread_sync.server import BreadSync

app = Flask(__name__)


@app.get("/")
def index() -> dict:
    return {"app": "mine", "bread": "/bread/agents"}


BreadSync(app, create_bread(config()).start(), url_prefix="/bread")
