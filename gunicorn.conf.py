"""``gunicorn wsgi:app`` reads this: gevent workers and the bind rules of bread_sync.

Override any setting on the command line (``-b``, ``-w``, ``-k gthread``) or in GUNICORN_CMD_ARGS.
"""

from bread_sync.server.gunicorn_conf import settings

globals().update(settings())
