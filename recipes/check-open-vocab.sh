#!/usr/bin/env bash
# bash recipes/check-open-vocab.sh: the recipe in recipes/check-open-vocab/ (run.sh, whose comment says what it runs and
# prints; table.py, its table). This name is the command that README, docs and commands.log give.
exec bash "$(dirname "$0")/check-open-vocab/run.sh" "$@"
