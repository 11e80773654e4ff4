import groc_cli


def test_help_lists_every_stage(groc):
    result = groc("--help")
    assert result.returncode == 0
    for stage in ("tokenize", "prepare", "lexicon"):
        assert stage in result.stdout.decode()


def test_version(groc):
    result = groc("--version")
    assert result.returncode == 0 and result.stdout.decode().strip() == f"groc {groc_cli.__version__}"


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
