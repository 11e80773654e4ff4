"""Which FAISS groc runs (``groc --version``), and a one-line refusal when there is none or it is broken.

FAISS comes as one of two pip distributions, chosen by an extra: ``groc-cli[cpu]`` (faiss-cpu) or
``groc-cli[gpu]`` (faiss-gpu-cu12). Both write the same files (``faiss/__init__.py``,
``faiss/class_wrappers.py``, ...), so uninstalling one deletes what the other had written and leaves a
``faiss`` directory that still imports, as an empty namespace package, but holds no index (issue 33).
That break showed only when the unbounded cache first ran; ``load_faiss`` names it before any work.
"""

from __future__ import annotations

from .errors import GrocError

INSTALL_HINT = ("pip install 'groc-cli[cpu]', or 'groc-cli[gpu]' on a machine with an NVIDIA GPU "
                "(docs/install.md)")
DISTRIBUTIONS = {"CPU": "faiss-cpu", "GPU": "faiss-gpu-cu12"}


class FaissUnavailable(GrocError):
    """No usable FAISS: not installed, failing to load, or the wreck of an uninstall."""


class FaissMissing(FaissUnavailable):
    """No FAISS installed at all (groc runs without it until the unbounded cache is asked for)."""


def load_faiss():
    """The faiss module, checked to hold an index class; FaissUnavailable naming the fix otherwise."""
    try:
        import faiss
    except ImportError as err:
        if err.name == "faiss":
            raise FaissMissing(f"FAISS (the unbounded cache's index) is not installed: {INSTALL_HINT}") from None
        raise FaissUnavailable(f"faiss fails to import ({err}); reinstall it: {INSTALL_HINT}") from None
    if not hasattr(faiss, "IndexFlatL2"):
        where = ", ".join(getattr(faiss, "__path__", None) or [str(getattr(faiss, "__file__", "?"))])
        raise FaissUnavailable(
            f"faiss in {where} imports but is unusable (it has no IndexFlatL2): its files were deleted, as "
            f"uninstalling one of two FAISS distributions that share them (faiss-cpu, faiss-gpu-cu12) does; {_repair()}")
    return faiss


def _repair() -> str:
    """The pip command that writes a broken FAISS's files again."""
    held = _distributions()
    if len(held) == 1:
        return f"write them again: {_reinstall(held[0])}"
    if held:
        return f"keep one: pip uninstall -y {' '.join(held)}, then {INSTALL_HINT}"
    return INSTALL_HINT


def _reinstall(distribution: str) -> str:
    from importlib.metadata import version

    return f"pip install --force-reinstall --no-deps {distribution}=={version(distribution)}"


def describe() -> str:
    """One line: FAISS's version, CPU or GPU build, and the pip distributions that hold it, e.g.
    'FAISS 1.15.1, CPU build: faiss-cpu'; 'no FAISS ...' with the fix when none is installed.
    FaissUnavailable when one is installed but broken."""
    try:
        faiss = load_faiss()
    except FaissMissing:
        return f"no FAISS, which the unbounded cache needs: {INSTALL_HINT}"
    # faiss-cpu has no GPU classes; faiss-gpu has them even on a machine without a GPU.
    build = "GPU" if hasattr(faiss, "StandardGpuResources") else "CPU"
    line = f"FAISS {getattr(faiss, '__version__', '(version unknown)')}, {build} build"
    held = _distributions()
    if len(held) > 1:
        keep = DISTRIBUTIONS[build] if DISTRIBUTIONS[build] in held else held[0]
        return (f"{line}: {' and '.join(held)} both write its files, so uninstalling one breaks the other; keep "
                f"{keep} alone: pip uninstall -y {' '.join(d for d in held if d != keep)} && {_reinstall(keep)}")
    return f"{line}: {held[0]}" if held else line


def _distributions() -> list[str]:
    """The installed pip distributions that provide the ``faiss`` package (none for a conda build)."""
    from importlib.metadata import packages_distributions

    return sorted(set(packages_distributions().get("faiss", [])))

