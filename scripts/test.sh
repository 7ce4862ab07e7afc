#!/usr/bin/env bash
# make test: installs what it needs, then checks formatting and vet, runs the unit tests (the
# control plane and ring logic under -race), the root-only tests when root, and a short fuzz pass.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# Test processes build component binaries into $TMPDIR/nicstack-testbin-PID and sweep the
# folders of finished ones when they start; the last ones are swept here, on any exit.
sweep() {
  for d in "${TMPDIR:-/tmp}"/nicstack-testbin-*; do
    [ -d "$d" ] && [ ! -e "/proc/${d##*-}" ] && rm -rf "$d"
  done
  return 0
}
trap sweep EXIT
echo "== gofmt, go vet"
bad=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
[ -z "$bad" ] || { echo "gofmt would change:"; echo "$bad"; exit 1; }
go vet ./...
echo "== go test -race (control plane, packet stream, config, router)"
race_pkgs=$(go list ./runtime/... ./router/... ./cmd/... ./proto/... 2>/dev/null || true)
go test -race -count=1 -timeout 15m $race_pkgs
echo "== go test (everything else)"
rest=$(go list ./... | grep -v -F -x -f <(printf '%s\n' $race_pkgs) || true)
[ -z "$rest" ] || go test -count=1 -timeout 15m $rest
echo "== fuzz (short pass)"
scripts/fuzz.sh
