"""The recipes' result tables, each built from finished outputs only (``report.load`` stops with
exit status 2 at a missing one).

The recipes call them through ``report`` (recipes/lib/steps.sh) once their stages are done:

    python recipes/lib/tables.py table2 --out=results/table2 --work=results/work --scale=small --datasets="ptb wt2"

A report is a function marked ``@report`` in a recipe's folder, recipes/NAME/table.py; this
command finds every folder's reports by scanning recipes/*/table.py, so a new recipe adds its
folder and edits nothing here (docs/extending.md, "Adding a recipe"). Each function's parameters
are its command's options (``--name=VALUE``; a list is one space-separated value), so a recipe's
table can be rebuilt, or tested, from its outputs alone.
"""

from __future__ import annotations

import argparse
import typing
from pathlib import Path

from report import RECIPES, recipe


def reports(root: Path = RECIPES) -> dict:
    """Every report of the recipe folders under root, by name (the function's, - for _), in the
    folders' order and each folder's order of definition. Two reports of one name are an error."""
    found: dict = {}
    for table in sorted(Path(root).glob("*/table.py")):
        module = recipe(table.parent.name, root)
        for function in vars(module).values():
            if not (callable(function) and getattr(function, "is_report", False)
                    and function.__module__ == module.__name__):
                continue
            name = function.__name__.replace("_", "-")
            if name in found:
                raise ValueError(f"two reports are named {name}: in {found[name].__module__} and {module.__name__}")
            found[name] = function
    return found


REPORTS = reports()
_OPTION_TYPES = {Path: Path, str: str, int: int, list[str]: str.split}  # a list: one space-separated value


def main(argv: list[str] | None = None, found: dict | None = None) -> None:
    found = REPORTS if found is None else found
    parser = argparse.ArgumentParser(prog="recipes/lib/tables.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="report", required=True, metavar="REPORT")
    for name, function in found.items():
        sub = commands.add_parser(name, help=function.__doc__.split("\n")[0], description=function.__doc__)
        for param, kind in typing.get_type_hints(function).items():
            if param != "return":
                sub.add_argument(f"--{param.replace('_', '-')}", dest=param, type=_OPTION_TYPES[kind], required=True)
    args = vars(parser.parse_args(argv))
    found[args.pop("report")](**args)


if __name__ == "__main__":
    main()
