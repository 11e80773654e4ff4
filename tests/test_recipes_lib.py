"""The recipes' shared shell library (recipes/lib/common.sh) and table writer (report.py):
finished stages are skipped, failed captures leave nothing, tables are never built from
missing outputs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]


def bash(script: str, tmp_path: Path, **env):
    full = {**os.environ, "RESULTS": str(tmp_path / "results"), "DATA": str(tmp_path), "PATH": os.environ["PATH"],
            "PYTHON": sys.executable, **env}
    full["PATH"] = f"{Path(sys.executable).parent}:{full['PATH']}"
    return subprocess.run(["bash", "-c", f"NAME=t; source {REPO}/recipes/lib/common.sh; {script}"],
                          capture_output=True, text=True, env=full)


def test_step_and_capture_skip_done_work_and_keep_failures_out(tmp_path):
    out = tmp_path / "results" / "work" / "a" / "x.json"
    r = bash(f"capture {out} echo '{{\"v\": 1}}'; capture {out} echo '{{\"v\": 2}}'", tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text()) == {"v": 1}  # the second run was skipped
    assert "(done)" in r.stderr
    log = (tmp_path / "results" / "t" / "commands.log").read_text()
    assert log.count("+ echo") == 1 and log.startswith("# ")

    bad = tmp_path / "results" / "work" / "bad.json"
    r = bash(f"capture {bad} bash -c 'echo partial; exit 3'; echo after", tmp_path)
    assert r.returncode == 3 and "after" not in r.stdout  # set -e stops the recipe
    assert not bad.exists() and not list(bad.parent.glob("bad.json.partial*"))

    marker = tmp_path / "results" / "work" / "made"
    r = bash(f"step {marker} touch {marker}; step {marker} false", tmp_path)
    assert r.returncode == 0 and marker.exists()


def test_bad_scale_or_data_stop_before_work(tmp_path):
    r = bash("echo ran", tmp_path, SCALE="huge")
    assert r.returncode == 2 and "SCALE must be small or paper" in r.stderr and "ran" not in r.stdout
    r = bash("echo ran", tmp_path, DATA=str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "is not a directory" in r.stderr


def test_report_writes_markdown_and_parquet_and_refuses_missing_outputs(tmp_path):
    sys.path.insert(0, str(REPO / "recipes" / "lib"))
    try:
        import report
    finally:
        sys.path.pop(0)
    (tmp_path / "a.json").write_text(json.dumps({"perplexity": 86.25}))
    t = report.Table("demo", "Demo", ["model", "ppl", "paper"])
    t.add(model="tied", ppl=report.load(tmp_path / "a.json")["perplexity"], paper=86.2)
    t.add(model="groc", ppl=float("inf"), paper=None)
    t.write(tmp_path / "out", notes=["a note"])
    md = (tmp_path / "out" / "demo.md").read_text()
    assert "| tied | 86.2 | 86.2 |" in md and "| groc | inf | – |" in md and "- a note" in md
    assert pq.read_table(tmp_path / "out" / "demo.parquet").to_pylist()[0] == {"model": "tied", "ppl": 86.25, "paper": 86.2}

    code = ("import sys; sys.path.insert(0, sys.argv[1]); import report; "
            "report.load(sys.argv[2])")
    r = subprocess.run([sys.executable, "-c", code, str(REPO / "recipes" / "lib"), str(tmp_path / "missing.json")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "missing" in r.stderr and "no table is written" in r.stderr
