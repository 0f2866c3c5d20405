"""Integration tests: the HTTP server in real gunicorn processes."""
