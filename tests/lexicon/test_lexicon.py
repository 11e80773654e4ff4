import json

import pyarrow.parquet as pq
import pytest

from groc_cli.errors import GrocError
from groc_cli.lexicon import wordnet as wn_module
from groc_cli.lexicon.extract import LexiconOptions, build_entries, coverage, keep_fraction


@pytest.mark.slow
def test_inflected_forms_reach_wordnet_and_order_is_deterministic(wordnet):
    dogs, ran, the = build_entries(wordnet, ["dogs", "ran", "the"], LexiconOptions())
    assert dogs.synset == "dog.n.01"
    # synonyms first (none single-word besides 'dog' itself), then hyponyms sorted by synset name
    assert dogs.relations == ["basenji", "corgi", "cur"]
    assert dogs.definition == ["a", "member", "of", "the", "genus", "canis", "(", "probably", "descended", "from"]
    assert ran.synset == "run.v.01" and len(ran.relations) == 3 and "run" not in ran.relations
    assert the.synset is None and the.relations == [] and the.definition == []


@pytest.mark.slow
def test_limits_and_multiword(wordnet):
    entry, = build_entries(wordnet, ["car"], LexiconOptions(max_relations=5, max_definition=4))
    assert len(entry.relations) == 5 and all("_" not in r for r in entry.relations)
    assert len(entry.definition) == 4


@pytest.mark.slow
def test_keep_fraction_is_seeded(wordnet):
    words = ["dog", "cat", "house", "run", "blue", "quickly", "the", "of"]
    entries = build_entries(wordnet, words, LexiconOptions())
    a = keep_fraction(entries, 0.5, seed=3)
    b = keep_fraction(entries, 0.5, seed=3)
    assert [e.word for e in a] == [e.word for e in b]
    cov = coverage(a, words)
    assert cov["with_definition"] == 3 and len(a) == len(entries)  # half of the six covered words; rows stay
    assert coverage(keep_fraction(entries, 0.0, 1), words)["with_definition"] == 0
    assert keep_fraction(entries, 1.0, seed=3) == entries  # recipes/table4.sh reuses the full-lexicon run for 1.0


@pytest.mark.slow
def test_cli_on_dataset_vocab(groc, data_dir, tmp_path):
    ds = tmp_path / "ptb"
    groc("prepare", "--train", data_dir / "ptb" / "ptb.valid.txt", "-o", ds, check=True)
    out = tmp_path / "lex.parquet"
    result = groc("lexicon", "--vocab", ds, "-o", out, "--json", check=True)
    report = json.loads(result.stdout)
    assert 0.6 < report["relations_coverage"] < report["definition_coverage"] < 0.95
    table = pq.read_table(out)
    assert table.column_names == ["word", "synset", "relations", "definition"]
    meta = json.loads(pq.read_schema(out).metadata[b"groc"])
    assert meta["stage"] == "lexicon" and meta["arguments"]["max_relations"] == 3
    assert "relations for" in result.stderr.decode()


@pytest.mark.slow
def test_cli_vocab_of_wrong_kind(groc, tmp_path):
    binary = tmp_path / "vocab.bin"
    binary.write_bytes(b"\x00\x01" * 100)
    result = groc("lexicon", "--vocab", binary, "-o", tmp_path / "lex.parquet")
    assert result.returncode != 0 and len(result.stderr.decode().strip().splitlines()) == 1
    assert not (tmp_path / "lex.parquet").exists()


@pytest.mark.slow
def test_debian_copy_gets_lexnames(tmp_path, monkeypatch):
    if not wn_module._is_wordnet_dir(wn_module.DEBIAN_WORDNET):
        pytest.skip("Debian's wordnet-base is not installed")
    monkeypatch.setenv("GROC_CACHE", str(tmp_path / "cache"))
    source = wn_module.open_wordnet(str(wn_module.DEBIAN_WORDNET))
    assert (tmp_path / "cache" / "nltk_data" / "corpora" / "wordnet" / "lexnames").is_file()
    assert source.reader.synsets("dog")[0].name() == "dog.n.01"


def test_missing_wordnet_says_how_to_get_it(tmp_path, monkeypatch):
    import nltk.data

    monkeypatch.setenv("GROC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(wn_module, "DEBIAN_WORDNET", tmp_path / "none")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "empty")])
    with pytest.raises(GrocError, match="wordnet-base"):
        wn_module.open_wordnet("auto")
    with pytest.raises(GrocError, match="not a directory"):
        wn_module.open_wordnet(str(tmp_path / "nowhere"))
