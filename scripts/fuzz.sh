#!/usr/bin/env bash
# A short pass of every fuzz target in the tree: FUZZTIME each (default 8s).
# Go 1.26's fuzz coordinator can report a bare "context deadline exceeded" when -fuzztime ends
# while a worker is mid-call (golang/go#75804, fixed in Go 1.27): such a run wrote no failing
# input and is retried once; anything else that fails is a finding and fails the pass.
set -euo pipefail
t=${FUZZTIME:-8s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fuzz_once() { go test -run '^$' -fuzz "^$2\$" -fuzztime "$t" "./${1#./}" >"$log" 2>&1; }
deadline_race() { grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:' "$log"; }
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
  dir=$(dirname "$f")
  for name in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    echo "fuzz: $dir $name ($t)"
    fuzz_once "$dir" "$name" && continue
    if deadline_race; then
      echo "fuzz: $name ended on Go's fuzztime deadline race (no failing input); once more"
      fuzz_once "$dir" "$name" && continue
    fi
    cat "$log"; exit 1
  done
done
