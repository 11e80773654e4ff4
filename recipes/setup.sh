#!/usr/bin/env bash
# Set up groc on a fresh machine: WordNet (Debian's wordnet-base), a virtual environment
# in .venv, PyTorch and FAISS (the CPU builds: torch 2.13.0 and faiss-cpu; with an NVIDIA
# driver, a CUDA build of torch and faiss-gpu-cu12), and groc itself with its test, plots
# (matplotlib) and tensorboard extras. Ends by printing groc's version and its FAISS build.
#   bash recipes/setup.sh            # then: .venv/bin/groc --help
# Environment: VENV (default .venv), PYTHON (default python3), GROC_TORCH (override the torch
# requirement). pip's own variables apply to every install, e.g. PIP_NO_INDEX=1
# PIP_FIND_LINKS=DIR to install offline from a directory of wheels (tests/test_setup.py does).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

if [ ! -f /usr/share/wordnet/data.noun ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian's wordnet-base" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q wordnet-base >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q wordnet-base >/dev/null; }
  else
    echo "setup: WordNet not in /usr/share/wordnet; install wordnet-base (as root) or run nltk.download('wordnet')" >&2
  fi
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
if command -v nvidia-smi >/dev/null && nvidia-smi >/dev/null 2>&1; then
  echo "setup: NVIDIA GPU found: CUDA torch and faiss-gpu-cu12" >&2
  torch=${GROC_TORCH:-torch>=2.1,<3} faiss=gpu ours=faiss-gpu-cu12 other=faiss-cpu
else
  # The CPU wheel of torch 2.13.0 is on our machines' disk; an unpinned torch pulls a multi-GB CUDA build.
  torch=${GROC_TORCH:-torch==2.13.0} faiss=cpu ours=faiss-cpu other=faiss-gpu-cu12
fi
installed() { "$VENV/bin/python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$1" 2>/dev/null; }

# faiss-cpu and faiss-gpu-cu12 write the same files (faiss/__init__.py, ...), so uninstalling one
# deletes the other's (issue 33): the environment gets one of them, and the other, left by an
# earlier setup (before that fix, or on the other kind of machine), goes before ours is installed.
if installed "$other" >/dev/null; then
  echo "setup: removing $other, which shares its files with $ours" >&2
  $PIP uninstall -y "$other"
fi
$PIP install "$torch"
$PIP install -e ".[$faiss,test,plots,tensorboard]"
# groc --version refuses a faiss whose files an uninstall deleted (an environment set up with
# both builds, or the removal above): pip counts ours installed, so write its files again.
if ! "$VENV/bin/groc" --version >&2; then
  echo "setup: writing $ours's files again" >&2
  $PIP install --force-reinstall --no-deps "$ours==$(installed "$ours")"
  "$VENV/bin/groc" --version >&2
fi
echo "setup: done; run $VENV/bin/groc --help" >&2
