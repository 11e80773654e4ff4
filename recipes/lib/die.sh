# die MESSAGE...: the one way a recipe refuses its input: "NAME: MESSAGE", one line on stderr, exit 2.
# Sourced by steps.sh (so by common.sh and quickstart.sh), lease.sh and the recipes that use neither;
# set NAME before calling it.
die() { echo "$NAME: $*" >&2; exit 2; }
