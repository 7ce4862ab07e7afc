#!/usr/bin/env bash
# make test: installs what it needs, then checks formatting and vet, runs every test under the
# race detector (the root-only ones when root), and a short fuzz pass.
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
# Every package runs under the race detector: the control plane, the glue of each component,
# drivers, guests and tools all share Go memory between goroutines. (It cannot see the mmapped
# rings; the packet stream's logic is also tested on a heap-backed variant and by model tests.)
echo "== go test -race"
go test -race -count=1 -timeout 18m ./...
# Genode's own form of a test: package runtime files, run as its depot autopilot runs them.
echo "== nicstack test deploy/genode/*.runtime"
go build -o bin/ ./cmd/... ./components/...
bin/nicstack test deploy/genode/*.runtime
echo "== fuzz (short pass)"
scripts/fuzz.sh
