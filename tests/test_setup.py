"""recipes/setup.sh on a machine with an NVIDIA GPU, run here without one and offline (issue 33).

A stand-in nvidia-smi on PATH sends setup.sh down its GPU branch. Every requirement of the project
is a stand-in wheel built in tmp_path: faiss-cpu and faiss-gpu-cu12 write the same files into
faiss/, as the real wheels do, and the GPU one has a file of its own (the real one: _loader.py), so
that uninstalling faiss-cpu after it leaves a faiss that imports but holds nothing, as in the
issue. The other stand-ins are metadata only; their code comes from this test's own environment
through PYTHONPATH (without its faiss), so that setup.sh's closing `groc --version` runs. pip
installs from those wheels alone (PIP_NO_INDEX, PIP_FIND_LINKS, no configuration files), into a
virtual environment in tmp_path, from a copy of the project: neither the network nor the real
.venv is touched.
"""

import base64
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from groc_cli.settings import toml_loads

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
VERSIONS = {"faiss-cpu": "1.15.1", "faiss-gpu-cu12": "1.14.1"}
SWIG = "class IndexFlatL2:\n    def __init__(self, d):\n        self.d = d\n"
FAISS_FILES = {
    "faiss-cpu": {
        "faiss/__init__.py": f"__version__ = {VERSIONS['faiss-cpu']!r}\nfrom .swigfaiss import IndexFlatL2\n",
        "faiss/swigfaiss.py": SWIG,
    },
    "faiss-gpu-cu12": {
        "faiss/__init__.py": f"__version__ = {VERSIONS['faiss-gpu-cu12']!r}\n"
                             "from . import _loader\nfrom .swigfaiss import IndexFlatL2, StandardGpuResources\n",
        "faiss/swigfaiss.py": SWIG + "\n\nclass StandardGpuResources:\n    pass\n",
        "faiss/_loader.py": "",
    },
}
WORKS = "import faiss; print(faiss.IndexFlatL2(4).d)"


def write_wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> None:
    """A pure-Python wheel of ``files`` (path -> text) and its metadata."""
    stem = f"{re.sub(r'[-_.]+', '_', name)}-{version}"
    info = f"{stem}.dist-info"
    files = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests/test_setup.py\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    record = []
    with zipfile.ZipFile(folder / f"{stem}-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
            wheel.writestr(path, data)
        wheel.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")


def requirement_names(pyproject: Path) -> set[str]:
    project = toml_loads(pyproject.read_text())["project"]
    specs = [*project["dependencies"], *(s for extra in project["optional-dependencies"].values() for s in extra)]
    return {re.match(r"[A-Za-z0-9._-]+", spec).group(0).lower() for spec in specs}


def stand_in_version(name: str) -> str:
    """This environment's version of ``name`` (so that the requirement holds), or any."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "99.0"


def code_view(folder: Path) -> Path:
    """This environment's importable code without its faiss, pip, groc or any metadata: links to it."""
    folder.mkdir()
    skip = re.compile(r"faiss|pip$|groc|__editable__|.*\.(dist-info|egg-info|pth)$|__pycache__$")
    for site in {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}:
        for entry in Path(site).iterdir():
            if not skip.match(entry.name) and not (folder / entry.name).exists():
                (folder / entry.name).symlink_to(entry)
    return folder


@pytest.fixture(scope="module")
def gpu_setup(tmp_path_factory):
    """Runs setup.sh's GPU branch once; (run(command...) in its environment, the first run)."""
    if not Path("/usr/share/wordnet/data.noun").exists() and os.getuid() == 0:
        pytest.skip("setup.sh would apt-get wordnet-base here; run recipes/setup.sh first")
    import setuptools

    if tuple(map(int, setuptools.__version__.split(".")[:2])) < (70, 1):
        pytest.skip("editable builds without isolation need setuptools >= 70.1 (its own bdist_wheel)")
    tmp = tmp_path_factory.mktemp("setup")
    project = tmp / "project"
    (project / "recipes").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "recipes/setup.sh"):
        shutil.copy(REPO / name, project / name)
    shutil.copytree(REPO / "groc_cli", project / "groc_cli", ignore=shutil.ignore_patterns("__pycache__"))

    wheels = tmp / "wheels"
    wheels.mkdir()
    for name in requirement_names(project / "pyproject.toml") | set(FAISS_FILES) | {"torch"}:
        write_wheel(wheels, name, VERSIONS.get(name) or stand_in_version(name), FAISS_FILES.get(name, {}))

    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: stand-in (tests/test_setup.py)'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)

    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", VENV=str(tmp / "venv"), PYTHON=sys.executable,
               PYTHONPATH=str(code_view(tmp / "view")), OMP_NUM_THREADS="1", PIP_CONFIG_FILE=os.devnull,
               PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels),
               # pip's inverted spelling: this turns build isolation off (its build needs an index).
               PIP_NO_BUILD_ISOLATION="0")

    def run(*command: str):
        return subprocess.run(command, capture_output=True, text=True, env=env, cwd=project)

    first = run("bash", "recipes/setup.sh")
    return run, first, tmp / "venv" / "bin"


def installed_faiss(run, venv: Path) -> list[str]:
    out = run(str(venv / "python"), "-c", "import importlib.metadata as m; "
              "print(*sorted(d.metadata['Name'] for d in m.distributions() if d.metadata['Name'].startswith('faiss')))")
    return out.stdout.split()


def test_gpu_branch_installs_one_working_faiss(gpu_setup):
    run, first, venv = gpu_setup
    assert first.returncode == 0, first.stderr
    assert "NVIDIA GPU found" in first.stderr
    assert run(str(venv / "python"), "-c", WORKS).stdout == "4\n"
    assert installed_faiss(run, venv) == ["faiss-gpu-cu12"]
    assert "(FAISS 1.14.1, GPU build: faiss-gpu-cu12)" in first.stderr  # groc --version's line


def test_gpu_branch_repairs_an_environment_with_both_builds(gpu_setup):
    run, first, venv = gpu_setup
    assert first.returncode == 0, first.stderr
    pip = (str(venv / "python"), "-m", "pip", "-q")
    assert run(*pip, "install", "--no-deps", "faiss-cpu").returncode == 0
    both = run(str(venv / "groc"), "--version")
    assert both.returncode == 0 and "faiss-cpu and faiss-gpu-cu12 both write its files" in both.stdout

    # What the old setup.sh did next: the faiss left imports, but is empty; groc says so in one line.
    assert run(*pip, "uninstall", "-y", "faiss-cpu").returncode == 0
    assert "IndexFlatL2" in run(str(venv / "python"), "-c", WORKS).stderr
    broken = run(str(venv / "groc"), "--version")
    assert broken.returncode == 2 and broken.stdout == ""
    assert broken.stderr.count("\n") == 1 and "imports but is unusable" in broken.stderr
    assert "pip install --force-reinstall --no-deps faiss-gpu-cu12==1.14.1" in broken.stderr

    assert run(*pip, "install", "--no-deps", "faiss-cpu").returncode == 0
    again = run("bash", "recipes/setup.sh")
    assert again.returncode == 0, again.stderr
    assert "removing faiss-cpu" in again.stderr and "writing faiss-gpu-cu12's files again" in again.stderr
    assert run(str(venv / "python"), "-c", WORKS).stdout == "4\n"
    assert installed_faiss(run, venv) == ["faiss-gpu-cu12"]
