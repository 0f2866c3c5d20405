"""gunicorn settings for bread_sync: gevent workers, so one worker holds many open streams.

Every setting can be overridden on the command line or with GUNICORN_CMD_ARGS.
"""

import os

bind = os.environ.get("BREAD_BIND", "127.0.0.1:3000")
worker_class = "gevent"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_connections = 2000
# Streams stay open for minutes; a gevent worker is not blocked by them, so no request timeout.
timeout = 30
graceful_timeout = 30
keepalive = 5
