#!/usr/bin/env bash
# bash recipes/check-wikitext2-caches.sh: the recipe in recipes/check-wikitext2-caches/ (run.sh, whose comment says what it runs and
# prints; table.py, its table). This name is the command that README, docs and commands.log give.
exec bash "$(dirname "$0")/check-wikitext2-caches/run.sh" "$@"
