#!/usr/bin/env bash
# bash recipes/quickstart.sh: the recipe in recipes/quickstart/ (run.sh, whose comment says what it runs and
# prints; table.py, its table). This name is the command that README, docs and commands.log give.
exec bash "$(dirname "$0")/quickstart/run.sh" "$@"
