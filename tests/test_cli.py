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


def test_help_and_the_light_stages_do_not_import_torch():
    """`groc --help`, `groc tokenize` and `groc prepare` load only their own command module: torch
    (2 s of a 3 s start) is imported by the stages that use it, when they run."""
    import subprocess
    import sys

    probe = ("import sys\n"
             "from groc_cli.cli import main\n"
             "code = main(sys.argv[1:])\n"
             "print('torch' in sys.modules, file=sys.stderr); sys.exit(code)")
    for args in (["--help"], ["tokenize", "--help"], ["prepare", "--help"], ["tokenize"]):
        r = subprocess.run([sys.executable, "-c", probe, *args], input=b"Hello, world.\n", capture_output=True)
        assert r.returncode == 0 and r.stderr.decode().strip().splitlines()[-1] == "False", (args, r.stderr)
    r = subprocess.run([sys.executable, "-c", probe, "train", "--help"], capture_output=True)
    assert r.returncode == 0 and r.stderr.decode().strip().splitlines()[-1] == "True"
