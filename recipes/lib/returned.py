"""What comes back from another machine is untrusted input (GUIDE 18): a tar archive returned by a rented
GPU is extracted only after every member has been checked, and only as plain files and folders.

    python recipes/lib/returned.py untar --into DIR --runs 1,2 --name gpu-resume PART...

reads the concatenated PARTs (state.tar.00, .01, ... of recipes/gpu-resume.sh run) as one tar archive and
extracts it into DIR, a new or empty folder, if and only if every member is
  * a regular file or a folder (no links, devices, FIFOs, sparse or other special members),
  * named by a clean relative path (no absolute path, no '..', '.', empty or repeated component), once,
  * one of the names the pack made here expects: manifest.tsv, back.tsv, runs/ID, runs/ID/... and
    runs/ID.log for the run ids given (those of the local manifest, never the returned one's),
and their sizes add up to no more than the parts hold. Files are written with this process's owner and
mode 0644 (folders 0755) less the umask, whatever the archive records. Otherwise nothing is extracted
and the one line "NAME: ..." on stderr says why, with exit status 2.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
import tarfile
from pathlib import Path

CHUNK = 1 << 20


class Refused(Exception):
    """An archive, or one of its members, that may not be extracted."""


class Damaged(Exception):
    """Parts that do not make a whole tar archive (one missing, one cut short)."""


def allowed_names(run_ids: list[str]) -> re.Pattern:
    if not run_ids or not all(re.fullmatch(r"[0-9]+", i) for i in run_ids):
        raise Refused(f"run ids must be whole numbers, not {','.join(run_ids)!r}")
    ids = "|".join(run_ids)
    return re.compile(rf"(manifest\.tsv|back\.tsv|runs|runs/({ids})(/.+)?|runs/({ids})\.log)")


def clean_name(name: str) -> str:
    """The member's name without a trailing slash, or Refused for one that could leave the folder."""
    stripped = name[:-1] if name.endswith("/") else name
    parts = stripped.split("/")
    if not stripped or name.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in name or "\0" in name:
        raise Refused(f"member {name!r} is not a clean relative path")
    return stripped


def check_members(archive: tarfile.TarFile, pattern: re.Pattern, budget: int) -> list[tuple[str, tarfile.TarInfo]]:
    """Every member's clean name and header, in order, or Refused naming the first bad one."""
    members, seen, total = [], set(), 0
    for member in archive:
        name = clean_name(member.name)
        if not (member.isreg() or member.isdir()) or member.issparse():
            kind = "symbolic link" if member.issym() else "hard link" if member.islnk() else "special file"
            raise Refused(f"member {name!r} is a {kind}; only regular files and folders may come back")
        if not pattern.fullmatch(name):
            raise Refused(f"member {name!r} is not one of the runs packed here")
        if name in seen:
            raise Refused(f"member {name!r} appears twice")
        seen.add(name)
        total += member.size
        if total > budget:
            raise Refused(f"its members hold more bytes ({total:,}) than its parts ({budget:,})")
        members.append((name, member))
    if not members:
        raise Refused("it holds nothing")
    for name, member in members:  # every parent named must be a folder, not a file
        parent = name.rsplit("/", 1)[0] if "/" in name else None
        while parent:
            clash = next((m for n, m in members if n == parent and not m.isdir()), None)
            if clash is not None:
                raise Refused(f"member {parent!r} is a file and a folder")
            parent = parent.rsplit("/", 1)[0] if "/" in parent else None
    return members


def untar(parts: list[Path], into: Path, run_ids: list[str]) -> None:
    if into.exists() and (not into.is_dir() or into.is_symlink() or any(into.iterdir())):
        raise Refused(f"{into} is not a new or empty folder")
    for part in parts:
        if part.is_symlink() or not part.is_file():
            raise Refused(f"{part} is not a regular file")
    data = io.BytesIO(b"".join(part.read_bytes() for part in parts))
    pattern = allowed_names(run_ids)
    try:
        with tarfile.open(fileobj=data, mode="r:") as archive:
            members = check_members(archive, pattern, len(data.getbuffer()))
            into.mkdir(parents=True, exist_ok=True)
            for name, member in members:
                target = into / name
                if member.isdir():
                    target.mkdir(mode=0o755, parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                source = archive.extractfile(member)
                # O_EXCL and O_NOFOLLOW: a file is created, never opened through a link or over another.
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as out:
                    while chunk := source.read(CHUNK):
                        out.write(chunk)
    except (tarfile.TarError, EOFError) as exc:
        raise Damaged(f"({exc})") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="recipes/lib/returned.py", description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    sub = verbs.add_parser("untar")
    sub.add_argument("--into", type=Path, required=True)
    sub.add_argument("--runs", required=True, help="the run ids packed here, comma-separated")
    sub.add_argument("--name", default="returned", help="the recipe's name, which starts the error line")
    sub.add_argument("parts", type=Path, nargs="+")
    args = parser.parse_args(argv)
    try:
        untar(args.parts, args.into, args.runs.split(","))
    except Refused as exc:
        print(f"{args.name}: the state.tar parts are refused: {exc}; nothing was put back", file=sys.stderr)
        return 2
    except Damaged as exc:
        print(f"{args.name}: the state.tar parts are incomplete or damaged {exc}; nothing was put back", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{args.name}: the state.tar parts could not be read or extracted ({exc}); nothing was put back",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
