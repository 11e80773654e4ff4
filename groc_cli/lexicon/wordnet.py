"""Finding and opening WordNet without a network.

Two sources are supported:
  * NLTK's own copy, where a user ran ``nltk.download('wordnet')`` (a directory or zip
    under one of ``nltk.data.path``);
  * Debian's ``wordnet-base`` package (``/usr/share/wordnet``). NLTK 3.10's path sandbox
    refuses that directory (and symlinks to it), and Debian ships no ``lexnames`` file,
    so the database files are copied once into a cache under an NLTK data root we add to
    ``nltk.data.path``, with the standard ``lexnames`` written beside them.
"""

from __future__ import annotations

import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..errors import GrocError

DEBIAN_WORDNET = Path("/usr/share/wordnet")
REQUIRED = [f"{kind}.{pos}" for kind in ("index", "data") for pos in ("noun", "verb", "adj", "adv")]
EXCEPTIONS = [f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv")]
# WordNet 3.0's lexicographer files, in lexnames order (see lexnames(5WN)).
LEXNAMES = (
    "adj.all 3|adj.pert 3|adv.all 4|noun.Tops 1|noun.act 1|noun.animal 1|noun.artifact 1|"
    "noun.attribute 1|noun.body 1|noun.cognition 1|noun.communication 1|noun.event 1|"
    "noun.feeling 1|noun.food 1|noun.group 1|noun.location 1|noun.motive 1|noun.object 1|"
    "noun.person 1|noun.phenomenon 1|noun.plant 1|noun.possession 1|noun.process 1|"
    "noun.quantity 1|noun.relation 1|noun.shape 1|noun.state 1|noun.substance 1|noun.time 1|"
    "verb.body 2|verb.change 2|verb.cognition 2|verb.communication 2|verb.competition 2|"
    "verb.consumption 2|verb.contact 2|verb.creation 2|verb.emotion 2|verb.motion 2|"
    "verb.perception 2|verb.possession 2|verb.social 2|verb.stative 2|verb.weather 2|adj.ppl 3"
).split("|")
HOW_TO_GET = (
    "WordNet not found: install Debian's package (apt-get install wordnet-base), "
    "or run python -c \"import nltk; nltk.download('wordnet')\" where a network is available, "
    "or pass `wordnet` DIR with the WordNet database files"
)


@dataclass
class WordNetSource:
    reader: object
    description: str
    version: str


def cache_root() -> Path:
    base = os.environ.get("GROC_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "groc"
    )
    return Path(base) / "nltk_data"


def _is_wordnet_dir(path: Path) -> bool:
    return all((path / name).is_file() for name in REQUIRED)


def _copy_to_cache(source: Path) -> Path:
    """Copy a WordNet database directory into the NLTK-visible cache, adding lexnames."""
    target = cache_root() / "corpora" / "wordnet"
    stamp = target / ".groc-source"
    key = f"{source.resolve()} {sum((source / n).stat().st_size for n in REQUIRED)}"
    if _is_wordnet_dir(target) and (target / "lexnames").is_file() and stamp.is_file() and stamp.read_text() == key:
        return target
    tmp = target.with_name(f".wordnet.incomplete-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        for entry in source.iterdir():
            if entry.is_file():
                shutil.copyfile(entry, tmp / entry.name)
        if not (tmp / "lexnames").exists():
            with open(tmp / "lexnames", "w") as handle:
                for number, line in enumerate(LEXNAMES):
                    name, pos = line.split()
                    handle.write(f"{number:02d}\t{name}\t{pos}\n")
        (tmp / ".groc-source").write_text(key)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise GrocError(f"cannot copy WordNet from {source} into {target.parent} ({exc.strerror}); set GROC_CACHE to a writable directory") from None
    return target


def _reader(root) -> object:
    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class _Reader(WordNetCorpusReader):
        # The mapping to other WordNet versions serves only the multilingual OMW data and
        # needs index.sense, which Debian's wordnet-base does not ship.
        def map_wn(self, version="wordnet"):
            return None

    if isinstance(root, Path):
        root = nltk.data.FileSystemPathPointer(str(root))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _Reader(root, None)


def open_wordnet(spec: str = "auto") -> WordNetSource:
    """Open WordNet from `spec`: "auto", or a directory with the database files."""
    import nltk.data

    root = cache_root()
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))
    if spec != "auto":
        path = Path(spec)
        if not path.is_dir():
            raise GrocError(f"`wordnet` {spec}: not a directory; give a directory with WordNet's index.* and data.* files, or 'auto'")
        for candidate in (path, path / "dict", path / "corpora" / "wordnet"):
            if _is_wordnet_dir(candidate):
                return _open_dir(candidate)
        raise GrocError(f"`wordnet` {spec}: no WordNet database here (expected index.noun, data.noun, ...)")
    try:
        pointer = nltk.data.find("corpora/wordnet")
        reader = _reader(pointer)
        cached = str(getattr(pointer, "path", pointer)).startswith(str(root))
        where = f"groc's cached copy of Debian's WordNet ({root})" if cached else f"NLTK data ({pointer})"
        return WordNetSource(reader, where, reader.get_version())
    except LookupError:
        pass
    except Exception as exc:  # a broken NLTK copy should not hide a working Debian one
        broken = str(exc).splitlines()[0]
        if not _is_wordnet_dir(DEBIAN_WORDNET):
            raise GrocError(f"NLTK's WordNet copy could not be read ({broken}); {HOW_TO_GET}") from None
    if _is_wordnet_dir(DEBIAN_WORDNET):
        return _open_dir(DEBIAN_WORDNET)
    raise GrocError(HOW_TO_GET)


def _open_dir(path: Path) -> WordNetSource:
    has_lexnames = (path / "lexnames").is_file()
    target = path if has_lexnames and _nltk_allows(path) else _copy_to_cache(path)
    try:
        reader = _reader(target)
    except Exception as exc:
        raise GrocError(f"WordNet at {path} could not be read: {str(exc).splitlines()[0]}") from None
    where = f"{path}" + (f" (copied to {target})" if target != path else "")
    return WordNetSource(reader, where, reader.get_version())


def _nltk_allows(path: Path) -> bool:
    import nltk.data

    resolved = path.resolve()
    return any(resolved.is_relative_to(Path(p).resolve()) for p in nltk.data.path if os.path.isdir(p)) and not path.is_symlink()
