#!/usr/bin/env bash
# bash recipes/converge.sh: the recipe in recipes/converge/ (run.sh, whose comment says what it runs and
# prints; table.py, its table). This name is the command that README, docs and commands.log give.
exec bash "$(dirname "$0")/converge/run.sh" "$@"
