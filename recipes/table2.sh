#!/usr/bin/env bash
# bash recipes/table2.sh: the recipe in recipes/table2/ (run.sh, whose comment says what it runs and
# prints; table.py, its table). This name is the command that README, docs and commands.log give.
exec bash "$(dirname "$0")/table2/run.sh" "$@"
