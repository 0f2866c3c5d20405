"""The WSGI entry point: ``gunicorn wsgi:app`` (see gunicorn.conf.py for the gevent worker).

Built in each worker after gunicorn forks, from the config ``BREAD_CONFIG`` names (default:
the demo agents), with ``BREAD_TRANSPORT``, ``BREAD_DB``, ``BREAD_MAX_BODY_BYTES`` and ``REDIS_URL``
applied: with ``REDIS_URL`` set, replicas fan crumbs out and send cancels through that Redis
(see docs/deployment.md). Auth without ``config.server.authorize``, and ``BREAD_API_KEYS`` or
``BREAD_SECRET`` set without the auth plugin, are refused here (``AUTH_NOT_CONFIGURED``), however
the server is launched: the worker never serves.
"""

from bread_sync.server.serve import served_app

app = served_app()
