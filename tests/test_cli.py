import groc_cli


def test_help_lists_every_stage(groc):
    result = groc("--help")
    assert result.returncode == 0
    for stage in ("tokenize", "prepare", "lexicon"):
        assert stage in result.stdout.decode()


def test_version(groc):
    result = groc("--version")
    assert result.returncode == 0 and result.stdout.decode().startswith(f"groc {groc_cli.__version__} (FAISS ")
    assert result.stdout.decode().count("\n") == 1  # recipes read the version as its second word


def test_bad_usage_is_one_line_on_stderr(groc):
    for args in (["no-such-stage"], ["prepare", "--no-such-flag"], ["tokenize", "-j", "zero"]):
        result = groc(*args)
        assert result.returncode == 2
        assert result.stdout == b""
        lines = result.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and "error" in lines[0]


def test_stage_help_ends_with_an_example(groc):
    for stage in ("tokenize", "prepare", "lexicon"):
        out = groc(stage, "--help").stdout.decode()
        assert "Examples" in out and f"groc {stage}" in out


def test_help_prose_wraps_to_the_terminal_not_to_the_source(groc):
    """An epilog's prose is wrapped at the terminal's width, not broken where its source line ended
    (typer's rich mode keeps single line breaks); example commands stay one a line."""
    wide = [line.rstrip() for line in groc("eval", "--help", env={"COLUMNS": "250"}).stdout.decode().splitlines()]
    assert any('tokens_per_s; with --grid also "grid"' in line for line in wide)  # one sentence, two source lines
    assert "   groc eval runs/ptb-tied data/ptb --config local-cache.toml theta=0.5" in wide
    narrow = groc("eval", "--help", env={"COLUMNS": "80"}).stdout.decode()
    assert max(map(len, narrow.splitlines())) <= 80


def test_help_and_the_light_stages_do_not_import_torch(tmp_path):
    """`groc --help`, `groc tokenize` and `groc prepare` load only their own command module, and every
    command's --help only its settings: torch (2 s of a 3 s start) is imported by the stages that use
    it, when they run."""
    import subprocess
    import sys

    from groc_cli.commands import SUMMARIES

    probe = ("import sys\n"
             "from groc_cli.cli import main\n"
             "code = main(sys.argv[1:])\n"
             "print('torch' in sys.modules, file=sys.stderr); sys.exit(code)")
    for args in (["--help"], ["tokenize"], *([name, "--help"] for name in SUMMARIES)):
        r = subprocess.run([sys.executable, "-c", probe, *args], input=b"Hello, world.\n", capture_output=True)
        assert r.returncode == 0 and r.stderr.decode().strip().splitlines()[-1] == "False", (args, r.stderr)
    # The probe sees torch where a stage runs: eval of a missing run loads it, then refuses.
    r = subprocess.run([sys.executable, "-c", probe, "eval", str(tmp_path / "none"), str(tmp_path)], capture_output=True)
    assert r.returncode == 2 and r.stderr.decode().strip().splitlines()[-1] == "True", r.stderr


def test_every_stage_takes_json():
    """`--json` on every stage: a switch where the record is optional, `--json/--no-json` (on by
    default) where the stage always printed its record."""
    from groc_cli.cli import command
    from groc_cli.commands import SUMMARIES

    for name in SUMMARIES:
        opts = {o for p in command(name).params for o in (*p.opts, *p.secondary_opts)}
        assert "--json" in opts, name
    for name in ("eval", "dump", "compare", "plot"):
        opts = {o for p in command(name).params for o in p.secondary_opts}
        assert "--no-json" in opts, name


def test_tokenize_json_record_and_its_refusal_on_stdout(groc, tmp_path):
    import json

    text = tmp_path / "in.txt"
    text.write_text("Hello, world! It's fine.\nSecond line.\n")
    r = groc("tokenize", text, "-o", tmp_path / "out.txt", "--json")
    record = json.loads(r.stdout)
    assert r.returncode == 0 and record["lines"] == 2 and record["tokens"] == 11
    assert record["output"] == str(tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text() == "Hello , world ! It 's fine .\nSecond line .\n"
    r = groc("tokenize", text, "--json")
    assert r.returncode == 2 and r.stdout == b"" and "--json needs -o FILE" in r.stderr.decode()


def test_every_flag_an_error_names_exists():
    """Hints in messages ('give --chunk ...') must name options the commands have."""
    import re
    from pathlib import Path

    from groc_cli.cli import command
    from groc_cli.commands import SUMMARIES

    known = {o for name in SUMMARIES for p in command(name).params for o in (*p.opts, *p.secondary_opts)}
    known |= {"--help", "--version", "--debug"}
    # Flags of other programs that messages and help quote.
    foreign = {"--nproc_per_node", "--nnodes", "--rdzv-endpoint", "--rdzv-backend", "--rdzv-id", "--node-rank",
               "--master-addr", "--master-port", "--logdir", "--force-reinstall", "--no-deps"}
    package = Path(groc_cli.__file__).parent
    mentioned: dict[str, str] = {}
    for path in package.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        for literal in re.findall(r"(?:f|rf|fr|r)?(\"[^\"\n]*\"|'[^'\n]*')", source):
            for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9_-]*[a-z0-9](?![\w{-])", literal):
                mentioned.setdefault(flag, f"{path.relative_to(package)}: {literal[:80]}")
    unknown = {f: where for f, where in mentioned.items() if f not in known and f not in foreign}
    assert not unknown, unknown


def test_a_closed_stdin_or_stdout_is_one_line_and_a_closed_stdout_does_not_fail_a_stage_that_writes_files(tmp_path):
    """Started with stdin or stdout closed (`<&-`, `>&-`, as some launchers do), a stage that reads
    stdin or writes its result there stopped with an AttributeError traceback."""
    import subprocess
    import sys

    from tests.conftest import run_env

    text = tmp_path / "t.txt"
    text.write_text("the cat sat .\n")

    def shell(command: str):
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=tmp_path,
                              env=run_env({"GROC": f"{sys.executable} -m groc_cli"}))

    for command, flag in (("$GROC tokenize <&-", "INPUT"), ("$GROC prepare --train - -o d <&-", "--train")):
        r = shell(command)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.strip().splitlines()[-1] == (f"groc: error: {flag} reads stdin, which is closed (`<&-`); "
                                                     "give a file, or pipe the text in")
    r = shell("$GROC tokenize t.txt >&-")
    assert r.returncode == 2 and r.stderr.startswith("groc: error: stdout is closed") and r.stderr.count("\n") == 1
    r = shell("$GROC prepare --train t.txt -o d --json >&-")  # the summary goes nowhere; the dataset is made
    assert r.returncode == 0 and (tmp_path / "d" / "manifest.json").is_file(), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "t.txt"]


def test_results_are_utf8_whatever_the_locale_and_messages_never_stop_a_stage(groc, tmp_path):
    """In an ASCII or Latin-1 locale `groc tokenize` stopped with a UnicodeEncodeError traceback at
    the first word outside it; stdout is UTF-8 (the format of every file groc reads and writes)."""
    text = "café naïve 東京 .\n"
    for encoding in ("ascii", "latin-1"):
        env = {"PYTHONIOENCODING": encoding}
        r = groc("tokenize", input=text.encode(), env=env)
        assert r.returncode == 0 and r.stdout.decode("utf-8") == "café naïve 東 京 .\n", r.stderr
        r = groc("prepare", "--train", tmp_path / "東京.txt", "-o", tmp_path / "d", env=env)
        assert r.returncode == 2 and "Traceback" not in r.stderr.decode(), r.stderr
        assert r.stderr.decode(encoding).strip() == f"groc: error: --train {tmp_path}/\\u6771\\u4eac.txt: no such file"
