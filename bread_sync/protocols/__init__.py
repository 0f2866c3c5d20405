"""The protocol bridges: bread's crumb streams spoken as other protocols.

Each bridge is a module (``ag_ui``, ``mcp``; ``a2a`` to come) behind an optional extra
(``pip install "bread-sync[ag-ui]"``), so one can be versioned or removed without touching the
runtime. A bridge uses only the public ``Bread`` API and, of the server, route registration and
the auth gate: ``bread_sync.server`` (``register_http_route``, ``authorize_run``, ``start_run_stream``),
``bread_sync.server.actions`` and ``bread_sync.server.guard``.
tests/test_architecture.py holds them to it.
"""
