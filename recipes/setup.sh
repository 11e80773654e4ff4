#!/usr/bin/env bash
# Set up groc on a fresh machine: WordNet (Debian's wordnet-base), a virtual environment
# in .venv, PyTorch (the CPU build 2.13.0 without CUDA; a CUDA build plus faiss-gpu with
# an NVIDIA driver), and groc itself with its test, plots (matplotlib) and tensorboard extras.
#   bash recipes/setup.sh            # then: .venv/bin/groc --help
# Environment: VENV (default .venv), PYTHON (default python3), GROC_TORCH (override the torch requirement).
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
  echo "setup: NVIDIA GPU found: CUDA torch and faiss-gpu" >&2
  $PIP install "${GROC_TORCH:-torch>=2.1,<3}"
  $PIP install -e ".[gpu,test,plots,tensorboard]"
  $PIP uninstall -y faiss-cpu >/dev/null 2>&1 || true
else
  # The CPU wheel of torch 2.13.0 is on our machines' disk; an unpinned torch pulls a multi-GB CUDA build.
  $PIP install "${GROC_TORCH:-torch==2.13.0}"
  $PIP install -e ".[test,plots,tensorboard]"
fi
"$VENV/bin/groc" --version >&2
echo "setup: done; run $VENV/bin/groc --help" >&2
