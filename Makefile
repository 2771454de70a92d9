# sfclab — run as root on Debian. `make test` and `make run` install what they need first.
GO      ?= go
BIN     := bin/sfclab
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: all deps build test run bench vet clean

all: build

deps:
	./scripts/install-deps.sh

build:
	$(GO) build -ldflags "-X github.com/sfclab/sfclab/internal/cli.Version=$(VERSION)" -o $(BIN) ./cmd/sfclab

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }

# Tests run for real as root against the kernel; packages run one at a time (2 cores).
test: deps build vet
	$(GO) test -count=1 -p 1 -timeout 30m ./...

# The main job: reproduce study A (3 runs x 30 s per scenario, ~10 minutes); the report lands in
# out/single-host-chain-TIME/report.md and report.html.
run: deps build
	./$(BIN) reproduce single-host-chain

# Speed and throughput figures: benchmarks, never timed unit tests.
bench: deps build
	$(GO) test -run '^$$' -bench . -benchtime 3x ./netdev/ ./deploy/ ./bench/...

clean:
	rm -rf bin
