# nicstack: see README.md. Every target installs what it needs (scripts/deps.sh).
GO      ?= go
BIN     := bin
PROTOC_GEN := $(shell $(GO) env GOPATH)/bin

.PHONY: all build run test bench pgo proto graph lint deps clean

all: build

deps:
	@scripts/deps.sh

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/... ./components/...

# The main job: the seed scenario (emulated i217-LM NIC -> nic_router -> embedded VM guest, no
# root needed), once per driver setting, with the seed-style table of throughput against CPU.
run: deps build
	$(BIN)/nicstack bench iperf deploy/sculpt_iperf.hid --time 5s

test:
	@scripts/test.sh

# Every benchmark, each with its reference in the same run; JSON lands in bench-results/.
bench: deps build
	@mkdir -p bench-results
	@echo "make bench: commit $$(git rev-parse --short HEAD 2>/dev/null), started $$(date -u '+%F %T UTC') on $$(nproc) CPUs,$$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), kernel $$(uname -r), load average $$(cut -d' ' -f1-3 /proc/loadavg)"
	$(BIN)/nicstack bench stream --json bench-results/stream.json
	$(BIN)/nicstack bench router --json bench-results/router.json
	$(BIN)/nicstack bench driver --time 5s --json bench-results/driver.json
	$(BIN)/nicstack bench iperf deploy/sculpt_iperf.hid --time 5s --runs 5 --rx-irq-throttle 0,651,5580,adaptive --direction rx,tx --latency --json bench-results/iperf.json --plot bench-results/iperf.png
	@if [ "$$(id -u)" = 0 ]; then \
	  $(BIN)/nicstack bench iperf deploy/linux_tap.hid --time 5s --runs 3 --compare kernel,pasta,kernel@65000,relay@65000 --json bench-results/linux_tap.json && \
	  $(BIN)/nicstack bench iperf deploy/linux_tap_1500.hid --time 5s --runs 3 --compare kernel,pasta,pasta@1500,relay --json bench-results/linux_tap_1500.json && \
	  $(BIN)/nicstack bench iperf deploy/linux_tap.hid --time 5s --runs 3 --congestion cubic --compare kernel,pasta,kernel@65000,relay@65000 --json bench-results/linux_tap_cubic.json && \
	  $(BIN)/nicstack bench iperf deploy/linux_tap_1500.hid --time 5s --runs 3 --congestion cubic --compare kernel,pasta,pasta@1500,relay --json bench-results/linux_tap_1500_cubic.json && \
	  $(GO) test ./internal/cni -run '^$$' -bench PodChurn -benchtime 1x -count 3; \
	else echo "bench: linux_tap and its kernel and pasta references, and the pods of deploy/cni.hid, need root, skipped"; fi
	@echo "make bench: ended $$(date -u '+%F %T UTC'), load average $$(cut -d' ' -f1-3 /proc/loadavg)"

# Regenerates nic_router's profile for profile-guided optimisation (go build uses a main
# package's default.pgo by itself): the CPU profile of the router's in-process benchmark, its
# per-frame path over two packet streams (udp-forward and NAT, 64 and 1500 bytes). go test
# names the command's functions by import path, go build main.*: mainprofile.go renames them.
pgo:
	$(GO) test ./components/nic_router -run '^$$' -bench Round -benchtime 2s -cpuprofile $(CURDIR)/nic_router.pprof -o $(CURDIR)/nic_router.test
	$(GO) run components/nic_router/mainprofile.go github.com/nicstack/nicstack/components/nic_router nic_router.pprof components/nic_router/default.pgo
	rm -f nic_router.test nic_router.pprof

# Regenerates the committed gRPC code; protoc comes from Debian, the plugins from go.mod's tool lines.
# Each file goes to its go_package's folder under proto/ (control.proto: proto/, supervisor.proto:
# proto/supervisorpb/).
proto: deps
	PATH="$$($(GO) env GOROOT)/bin:$$PATH" protoc -I proto \
	  --plugin=protoc-gen-go="$$($(GO) tool -n protoc-gen-go)" \
	  --plugin=protoc-gen-go-grpc="$$($(GO) tool -n protoc-gen-go-grpc)" \
	  --go_out=proto --go_opt=module=github.com/nicstack/nicstack/proto \
	  --go-grpc_out=proto --go-grpc_opt=module=github.com/nicstack/nicstack/proto \
	  proto/*.proto

# README's picture: the seed scenario drawn on 2 CPUs (fixed, so that the files do not depend
# on the machine). cmd/nicstack's TestSeedGraphCurrent fails when docs/seed.dot is stale. The
# SVG needs Graphviz's dot (Debian: graphviz).
graph:
	$(GO) run ./cmd/nicstack graph deploy/sculpt_iperf.hid --cpus 2 > docs/seed.dot
	$(GO) run ./cmd/nicstack graph deploy/sculpt_iperf.hid --cpus 2 --svg docs/seed.svg

lint:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$bad" ] || { echo "gofmt: $$bad"; exit 1; }
	$(GO) vet ./...

clean:
	rm -rf $(BIN) bench-results
