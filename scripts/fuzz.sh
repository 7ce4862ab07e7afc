#!/usr/bin/env bash
# A short pass of every fuzz target in the tree: FUZZTIME each (default 8s).
set -euo pipefail
t=${FUZZTIME:-8s}
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
  dir=$(dirname "$f")
  for name in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    echo "fuzz: $dir $name ($t)"
    go test -run '^$' -fuzz "^${name}\$" -fuzztime "$t" "./${dir#./}" >/tmp/nicstack-fuzz.log 2>&1 || { cat /tmp/nicstack-fuzz.log; exit 1; }
  done
done
