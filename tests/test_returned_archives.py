"""What comes back from a rented GPU is untrusted (GUIDE 18): `recipes/gpu-resume.sh unpack` given crafted
state archives, and `recipes/gpu-table2.sh unpack` given crafted bundles. The pack made here decides which runs
may come back and where they go; only regular files and folders under those runs are extracted, with this
process's owner and plain modes; anything else is one line, exit 2, and nothing local changes."""

import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, run_env, run_groc

pytestmark = pytest.mark.slow

SCRIPT = REPO / "recipes" / "gpu-resume.sh"


def resume_recipe(tmp: Path, *args) -> subprocess.CompletedProcess:
    env = run_env({"GPU_RESUME_PACK": str(tmp / "pack")})
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def packed(tmp_path_factory, tiny_run):
    """Two runs here (copies of tiny_run.small() on a copy of its dataset), packed: pack/manifest.tsv names
    them; a victim folder outside them."""
    t = tmp_path_factory.mktemp("returned")
    tiny_run.copy(tiny_run.small_data(), t / "ds")
    for name in ("a", "b"):
        tiny_run.copy(tiny_run.small(), t / "runs" / name)
    r = resume_recipe(t, "pack", t / "ds", t / "runs" / "a", t / "runs" / "b")
    assert r.returncode == 0, r.stderr
    (t / "victim").mkdir()
    (t / "victim" / "precious.txt").write_text("keep me")
    return t


def snapshot(t: Path) -> dict:
    """Every file under the runs and the victim: name -> bytes (what must not change)."""
    return {str(p.relative_to(t)): p.read_bytes() for root in ("runs", "victim") for p in sorted((t / root).rglob("*"))
            if p.is_file() and not p.is_symlink()}


def honest_members(t: Path) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """The archive `run` would bring back had the runs not trained there: the pack as it is, and back.tsv."""
    pack = t / "pack"
    out = []
    for path in [pack / "manifest.tsv", *sorted(p for run in ("1", "2") for p in [pack / "runs" / run,
                                                                                 *(pack / "runs" / run).rglob("*")])]:
        info = tarfile.TarInfo(str(path.relative_to(pack)))
        if path.is_dir():
            info.type = tarfile.DIRTYPE
            out.append((info, None))
        else:
            data = path.read_bytes()
            info.size = len(data)
            out.append((info, data))
    back = b"1\n2\n"
    info = tarfile.TarInfo("back.tsv")
    info.size = len(back)
    out.append((info, back))
    return out


def write_parts(folder: Path, members) -> Path:
    folder.mkdir()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    (folder / "state.tar.00").write_bytes(buffer.getvalue())
    return folder


def member(name: str, data: bytes = b"x", **attributes) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.size = len(data) if attributes.get("type", tarfile.REGTYPE) == tarfile.REGTYPE else 0
    for key, value in attributes.items():
        setattr(info, key, value)
    return info, data if info.type == tarfile.REGTYPE else None


def replace(members, name: str, new) -> list:
    return [new if info.name == name else (info, data) for info, data in members]


def crafted(t: Path):
    victim = str(t / "victim")
    honest = honest_members(t)
    manifest = (t / "pack" / "manifest.tsv").read_text()
    forged = manifest.replace(str(t / "runs" / "a"), victim).encode()
    return {
        "a manifest naming other destinations": (replace(honest, "manifest.tsv", member("manifest.tsv", forged)),
                                                 "not of the pack made here"),
        "a run that comes back as a link": (
            [(i, d) for i, d in honest if not i.name.startswith("runs/1")]
            + [member("runs/1", type=tarfile.SYMTYPE, linkname=victim)], "is a symbolic link"),
        "a link to a system file inside a run": (honest + [member("runs/1/last/passwd", type=tarfile.SYMTYPE,
                                                                  linkname="/etc/passwd")], "is a symbolic link"),
        "a hard link inside a run": (honest + [member("runs/1/last/shadow", type=tarfile.LNKTYPE,
                                                      linkname="/etc/shadow")], "is a hard link"),
        "a device node": (honest + [member("runs/1/null", type=tarfile.CHRTYPE, devmajor=1, devminor=3)],
                          "is a special file"),
        "a FIFO": (honest + [member("runs/2/fifo", type=tarfile.FIFOTYPE)], "is a special file"),
        "a path that climbs out": (honest + [member("runs/1/../../victim/precious.txt", b"gone")],
                                   "is not a clean relative path"),
        "an absolute path": (honest + [member(victim + "/precious.txt", b"gone")], "is not a clean relative path"),
        "a run that was not packed": (honest + [member("runs/3/config.json", b"{}")], "is not one of the runs packed"),
        "a file outside the runs": (honest + [member("evil.sh", b"rm -rf /")], "is not one of the runs packed"),
        "a member twice": (honest + [member("back.tsv", b"1\n")], "appears twice"),
        "back.tsv naming a run not packed": (replace(honest, "back.tsv", member("back.tsv", b"1\n../../victim\n")),
                                             "name a run that was not packed here"),
    }


CASES = ["a manifest naming other destinations", "a run that comes back as a link", "a link to a system file inside a run",
         "a hard link inside a run", "a device node", "a FIFO", "a path that climbs out", "an absolute path",
         "a run that was not packed", "a file outside the runs", "a member twice", "back.tsv naming a run not packed"]


@pytest.mark.parametrize("case", CASES)
def test_a_crafted_state_archive_is_refused_whole_and_changes_nothing(packed, tmp_path, case):
    t = packed
    members, message = crafted(t)[case]
    parts = write_parts(tmp_path / "back", members)
    before = snapshot(t)
    r = resume_recipe(t, "unpack", parts)
    assert r.returncode == 2, (case, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, (case, r.stderr)
    assert r.stdout == ""
    assert snapshot(t) == before
    assert not (t / "runs" / "a").is_symlink() and not list((t / "runs").glob("*.gpu-resume.*"))
    assert not list(t.glob("pack.*"))  # the folder it extracted into is gone too


def test_an_honest_archive_is_put_back_with_our_owner_and_plain_modes(packed, tmp_path):
    t = packed
    honest = honest_members(t)
    # The archive says: owned by uid 4321, setuid and world-writable. None of it is kept.
    for info, _ in honest:
        info.uid, info.gid, info.uname, info.gname = 4321, 4321, "mallory", "mallory"
        info.mode = 0o4777 if info.isreg() else 0o777
    r = resume_recipe(t, "unpack", write_parts(tmp_path / "back", honest))
    assert r.returncode == 0, r.stderr
    assert "2 run(s) put back, 0 left as they were" in r.stdout
    for path in [t / "runs" / "a", *(t / "runs" / "a").rglob("*")]:
        st = path.lstat()
        assert st.st_uid == os.getuid() and not stat.S_ISLNK(st.st_mode)
        assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_IWOTH), (path, oct(st.st_mode))
    # and the run resumes here
    run_groc("train", t / "ds", "-o", t / "runs" / "a", "--resume", "--max-tokens", "200", "--device", "cpu", check=True)


def test_without_the_local_pack_nothing_comes_back(packed, tmp_path):
    t = packed
    parts = write_parts(tmp_path / "back", honest_members(t))
    env = run_env({"GPU_RESUME_PACK": str(tmp_path / "no-pack")})
    r = subprocess.run(["bash", str(SCRIPT), "unpack", str(parts)], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "no pack here" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


# -- gpu-table2.sh unpack: a collected bundle ----------------------------------------------------------------

TABLE2 = REPO / "recipes" / "gpu-table2.sh"


def bundle(folder: Path, dataset="ptb", kinds=("tied",), logp=(-1.0, -2.0), per_token: bytes | None = None) -> Path:
    folder.mkdir()
    table = pa.table({"position": [0, 1], "word": ["the", "cat"], "in_train": [True, True], "train_freq": [5, 1]})
    for kind in kinds:
        table = table.append_column(kind, pa.array(logp, pa.float32()))
    meta = {"stage": "gpu-table2 collect", "evaluations": {k: {"stage": "eval"} for k in kinds}}
    pq.write_table(table.replace_schema_metadata({b"groc": json.dumps(meta)}), folder / "per-token.parquet")
    if per_token is not None:
        (folder / "per-token.parquet").write_bytes(per_token)
    runs = {"window": {"dataset": dataset}, "runs": {k: {"evaluation": {"perplexity": 4.5}} for k in kinds}}
    (folder / "runs.json").write_text(json.dumps(runs))
    return folder


def table2_unpack(folder: Path, out: Path) -> subprocess.CompletedProcess:
    # unpack reads no corpus, but every recipe wants DATA to be a directory (common.sh): a checkout that
    # does not sit beside ../shared/data (a clone in /tmp) gives it an empty one
    env = run_env({"DATA": str(out.parent / "no-corpora")})
    Path(env["DATA"]).mkdir(exist_ok=True)
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    return subprocess.run(["bash", str(TABLE2), "unpack", str(folder), str(out)], capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL)


def test_an_honest_bundle_is_unpacked(tmp_path):
    r = table2_unpack(bundle(tmp_path / "b", kinds=("tied", "groc")), tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "ptb-groc.test.json", "ptb-groc.test.tokens.parquet", "ptb-tied.test.json", "ptb-tied.test.tokens.parquet"]


@pytest.mark.parametrize("kwargs,message", [
    ({"dataset": "../../escape"}, "dataset"),
    ({"dataset": "/tmp/abs"}, "dataset"),
    ({"kinds": ("../evil",)}, "output layer"),
    ({"kinds": ("tied", "tied/../../x")}, "output layer"),
    ({"logp": (float("nan"), -1.0)}, "log-probabilities"),
    ({"logp": (0.5, -1.0)}, "log-probabilities"),
    ({"per_token": b"PAR1 not parquet"}, "per-token.parquet"),
])
def test_a_crafted_or_damaged_bundle_is_one_line_and_writes_nothing(tmp_path, kwargs, message):
    out = tmp_path / "out"
    r = table2_unpack(bundle(tmp_path / "b", **kwargs), out)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not out.exists() and not list(tmp_path.rglob("*escape*")) and not list(tmp_path.rglob("*evil*"))


def test_a_bundle_file_that_is_a_link_is_refused(tmp_path):
    folder = bundle(tmp_path / "b")
    (folder / "runs.json").unlink()
    (folder / "runs.json").symlink_to("/etc/hostname")
    r = table2_unpack(folder, tmp_path / "out")
    assert r.returncode == 2 and "runs.json" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "out").exists()
