# nicstack: see README.md. Every target installs what it needs (scripts/deps.sh).
GO      ?= go
BIN     := bin
PROTOC_GEN := $(shell $(GO) env GOPATH)/bin

.PHONY: all build run test bench proto lint deps clean

all: build

deps:
	@scripts/deps.sh

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/... $(wildcard ./components/*)

# The main job: until the supervisor and scenarios exist, the packet-stream benchmark.
run: deps build
	$(BIN)/nicstack bench stream

test:
	@scripts/test.sh

bench: deps build
	$(BIN)/nicstack bench stream

# Regenerates the committed gRPC code; protoc comes from Debian, the plugins from go.mod's tool lines.
proto: deps
	PATH="$$($(GO) env GOROOT)/bin:$$PATH" protoc -I proto \
	  --plugin=protoc-gen-go="$$($(GO) tool -n protoc-gen-go)" \
	  --plugin=protoc-gen-go-grpc="$$($(GO) tool -n protoc-gen-go-grpc)" \
	  --go_out=proto --go_opt=paths=source_relative \
	  --go-grpc_out=proto --go-grpc_opt=paths=source_relative \
	  proto/*.proto

lint:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$bad" ] || { echo "gofmt: $$bad"; exit 1; }
	$(GO) vet ./...

clean:
	rm -rf $(BIN)
