#!/usr/bin/env bash
# bash recipes/figure3.sh: the recipe in recipes/figure3/ (run.sh, whose comment says what it runs and
# prints; table.py, its table). This name is the command that README, docs and commands.log give.
exec bash "$(dirname "$0")/figure3/run.sh" "$@"
