"""The WSGI entry point: ``gunicorn wsgi:app`` (see gunicorn.conf.py for the gevent worker).

Built in each worker after gunicorn forks, from the config ``BREAD_CONFIG`` names (default:
the demo agents), with ``BREAD_TRANSPORT``, ``BREAD_DB`` and ``BREAD_MAX_BODY_BYTES`` applied.
"""

from bread_sync import create_bread
from bread_sync.server import create_server

app = create_server(create_bread().start())
