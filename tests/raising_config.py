"""A config module that raises as it is imported, as docs/security.md's example would at its top
level without the key exported (tests/test_cli.py)."""

import os

from bread_sync.demo import config as demo_config

OPS_API_KEY = os.environ["OPS_API_KEY"]
config = demo_config()
