"""One way to name a pluggable part: an object, an alias from a seam's table, or a dotted path.

Modules are imported lazily, so an optional dependency (redis, openai) is imported only when
named, and a missing extra says which ``pip install`` fixes it.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from .errors import install_hint

#: Which extra provides the third-party module a built-in implementation needs.
EXTRAS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "redis": "redis",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "huey": "queue",
    "prometheus_client": "metrics",
}


def import_string(path: str) -> Any:
    """``package.module:attribute`` (or ``package.module.attribute``) to the object it names."""
    module_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    module = import_module(module_name)
    try:
        return getattr(module, attr) if attr else module
    except AttributeError:
        raise ValueError(f"{module_name!r} has no attribute {attr!r}") from None


def import_module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        raise ImportError(f"{name} needs the {extra!r} extra: {install_hint(extra)}") from exc


def require(name: str) -> None:
    """Fail now, as :func:`import_module` would, if ``name`` is not installed; import nothing.

    For a part built in a gunicorn master and used in its workers: importing there would import
    ``ssl`` and ``socket`` users before gevent patches them in the workers.
    """
    if importlib.util.find_spec(name) is None:
        import_module(name)


def resolve(spec: Any, table: dict[str, str], factory: str, **opts: Any) -> Any:
    """Build a seam's implementation from ``spec``.

    ``spec`` is an instance (returned as is), an alias of ``table`` (its module's ``factory``
    is called with ``opts``) or a dotted path to a factory or instance.
    """
    if not isinstance(spec, str):
        return spec
    if spec in table:
        return getattr(import_module(table[spec]), factory)(**opts)
    if "." in spec or ":" in spec:
        target = import_string(spec)
        return target(**opts) if callable(target) else target
    raise ValueError(f"unknown name {spec!r}: expected one of {sorted(table)} or a dotted path")
