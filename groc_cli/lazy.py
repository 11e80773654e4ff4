"""Names a package exports from modules it imports only when a name is first used (PEP 562), so that
importing the package loads no torch: ``groc_cli.models`` and ``groc_cli.evaluation``."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_exports(package: str, modules: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``package.MODULE`` for each name of
    ``modules`` ({name: MODULE}) on its first use and returns the name from it."""

    def __getattr__(name: str) -> Any:
        if name in modules:
            return getattr(importlib.import_module(f"{package}.{modules[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
