# Shared by recipes/gpu-lease.sh and recipes/gpu-resume.sh: the checks that a lent GPU window's one
# device command makes before it starts anything. Source it after setting NAME; each check prints one
# line, "NAME: ...", and exits 2 (die.sh's die, which the recipes use for their own checks too).

source "$(dirname "${BASH_SOURCE[0]}")/die.sh"

# lease_seconds RESERVE_DEFAULT: SECONDS_LEFT (default 540: what a 10-minute command leaves after the
# machine's start) and RESERVE (default RESERVE_DEFAULT), each a whole number of seconds.
lease_seconds() {
  SECONDS_LEFT=${SECONDS_LEFT:-540} RESERVE=${RESERVE:-$1}
  local v
  for v in SECONDS_LEFT RESERVE; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v must be a whole number of seconds, not '${!v}'"
  done
}

# lease_leaves SECONDS WHAT: SECONDS_LEFT leaves more than SECONDS after RESERVE (WHAT names them).
lease_leaves() {
  [ "$SECONDS_LEFT" -gt $((RESERVE + $1)) ] || die "SECONDS_LEFT=$SECONDS_LEFT leaves $2 after RESERVE=$RESERVE"
}

# lease_empty_dir DIR: DIR is new or an empty directory (the command writes only what it brings back).
lease_empty_dir() {
  if [ -e "$1" ] && { [ ! -d "$1" ] || [ -n "$(ls -A "$1")" ]; }; then
    die "$1 is not an empty directory; run writes into an empty or new one"
  fi
}

# lease_python: PY, the lent image's python3 (or python) on PATH.
lease_python() {
  PY=$(command -v python3 || command -v python || true)
  [ -n "$PY" ] || die "no python3 on PATH"
}

# lease_gpu: the GPU's name, driver and memory into the log, where nvidia-smi is.
lease_gpu() {
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  fi
}
