"""The optional extras of the package, and the error a feature gives when its extra is not installed.

The core install is what the engines need (an application embedding the macro or template engine gets nothing
else); the service, PostgreSQL and fuzzing are extras (``pyproject.toml``): ``tavernbox[serve]``,
``tavernbox[postgres]``, ``tavernbox[fuzz]``, ``tavernbox[tokenizers]`` (SillyTavern's sentencepiece
tokenizers), ``tavernbox[all]``.
"""

from __future__ import annotations

import importlib

from .errors import TemplateError

__all__ = ["EXTRAS", "require_extra"]

#: extra -> the modules it brings (the import names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "serve": ("fastapi", "uvicorn", "httpx"),
    "postgres": ("psycopg",),
    "fuzz": ("hypothesis",),
    "tokenizers": ("sentencepiece",),
}


def require_extra(extra: str, what: str) -> None:
    """Raise ``INSTALL_EXTRA_MISSING`` naming the ``pip install`` that brings ``extra`` when one of its modules is
    missing; ``what`` is the feature that needs it (``"tavernbox serve"``)."""
    missing = []
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise TemplateError(f"{what} needs {', '.join(missing)}, which the core install leaves out: "
                            f"pip install 'tavernbox[{extra}]'", code="INSTALL_EXTRA_MISSING")
