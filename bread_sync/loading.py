"""One way to name a pluggable part: an object, an alias from a seam's table, or a dotted path.

Modules are imported lazily, so an optional dependency (redis, openai) is imported only when
named, and a missing extra says which ``pip install`` fixes it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sysconfig
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .errors import BreadError, install_hint

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
    with raised_in(f"importing {module_name}"):
        module = import_module(module_name)
    try:
        return getattr(module, attr) if attr else module
    except AttributeError:
        raise ValueError(f"{module_name!r} has no attribute {attr!r}") from None


def import_module(name: str, needed_by: str | None = None) -> Any:
    """``importlib.import_module``; a missing extra says which, and what needs it (``needed_by``,
    by default the module ``name``)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        raise ImportError(f"{needed_by or name} needs the {extra!r} extra: {install_hint(extra)}") from exc


def require(name: str, needed_by: str | None = None) -> None:
    """Fail now, as :func:`import_module` would, if ``name`` is not installed; import nothing.

    For a part built in a gunicorn master and used in its workers: importing there would import
    ``ssl`` and ``socket`` users before gevent patches them in the workers.
    """
    if importlib.util.find_spec(name) is None:
        import_module(name, needed_by)


#: Where code that is not the user's lives: Python's library, installed packages, bread_sync.
#: (A virtual environment's packages sit inside its platstdlib folder: they are not Python's.)
_PYTHON = tuple(f"{sysconfig.get_path(kind)}{os.sep}" for kind in ("stdlib", "platstdlib"))
_PACKAGES = tuple(f"{sysconfig.get_path(kind)}{os.sep}" for kind in ("purelib", "platlib"))
_BREAD_SYNC = f"{os.path.dirname(os.path.abspath(__file__))}{os.sep}"
_NOT_USER_CODE = ("<", *_PYTHON, *_PACKAGES, _BREAD_SYNC)
#: The frames between bread_sync and the code it runs: its own, and the import machinery's.
_ENTERING = (_BREAD_SYNC, f"{os.path.dirname(importlib.__file__)}{os.sep}", "<frozen importlib.")


@contextmanager
def raised_in(doing: str) -> Iterator[None]:
    """Code of the user's (a module a path names, a config factory) run within: what it raises
    is a ``ValueError`` of one line that names the exception (and a ``BreadError``'s code) and
    where the user's code raised it, so a command can say it as a config that cannot load. A
    missing module (ImportError) says which already, and passes as it is."""
    try:
        yield
    except ImportError:
        raise
    except Exception as exc:
        at = raised_at(exc)
        where = f" ({at})" if at else ""
        raise ValueError(f"{doing} raised {_named(exc)}: {_said(exc)}{where}") from exc


def _named(exc: Exception) -> str:
    return f"{type(exc).__name__} {exc.code}" if isinstance(exc, BreadError) else type(exc).__name__


def _said(exc: Exception) -> str:
    """``exc``'s message on one line (a pydantic error's is a table); a SyntaxError's without
    the file and line :func:`raised_at` names."""
    said = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return " ".join(said.split())


def raised_at(exc: BaseException) -> str | None:
    """``file:line`` where the user's code raised ``exc``: a SyntaxError's own place; else the
    innermost frame of its traceback in the user's code, not the line of ``os`` that raised for
    it. Code installed as a package has no such frame: then the first frame past bread_sync and
    the import machinery, where its module or factory was entered; None if that is Python's."""
    if isinstance(exc, SyntaxError) and exc.filename and not exc.filename.startswith("<"):
        return f"{exc.filename}:{exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    own = [frame for frame in frames if not frame.filename.startswith(_NOT_USER_CODE)]
    entered = [frame for frame in frames if not frame.filename.startswith(_ENTERING)]
    frame = own[-1] if own else entered[0] if entered else None
    if frame is None or _pythons(frame.filename):
        return None
    return f"{frame.filename}:{frame.lineno}"


def _pythons(filename: str) -> bool:
    """Whether ``filename`` is Python's own code (its library, or frozen or generated code)."""
    return filename.startswith(("<", *_PYTHON)) and not filename.startswith(_PACKAGES)


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
