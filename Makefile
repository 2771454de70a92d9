# sfclab — run as root on Debian. `make test` and `make run` install what they need first.
GO      ?= go
BIN     := bin/sfclab
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: all deps cluster images build test run bench fuzz vet clean generate

all: build

deps:
	./scripts/install-deps.sh

# The Kubernetes binaries of the test cluster (scripts/kubecluster), built from the Go module
# proxy in a wrapper module of their own (the main go.mod stays free of k8s.io/kubernetes).
# Cold: ~6-8 min on 2 cores; with the Go build cache: seconds. Only the tests need them.
# It needs only Go (CGO off), so `make test` builds it while deps' apt installs run.
cluster:
	./scripts/kubecluster/build.sh

# The images the tests boot: the Docker node image and the VM guests' Debian roots (the base
# one, the one with the http-server kind's packages that TestDockerNATVMServer boots, and the
# one with ab that TestBenchABVMSource's VM client runs: experiments/vm-source.yaml's), made
# by debootstrap from this host's APT mirror and reused while their package lists stand (cold:
# minutes each, waiting on the mirror and dpkg more than on the CPU, so `make test` builds them
# beside the cluster's compile instead of inside the first test that needs them, and side by
# side with each other).
images: deps
	@$(MAKE) --no-print-directory build
	@log=$$(mktemp); ./$(BIN) images build > $$log 2>&1 & node=$$!; \
	./$(BIN) images build --runtime vm --image debian && \
	./$(BIN) images build --runtime vm --lab examples/vm-web-nat.yaml && \
	./$(BIN) images build --runtime vm --experiment experiments/vm-source.yaml; vm=$$?; \
	wait $$node; n=$$?; cat $$log; rm -f $$log; \
	test $$vm -eq 0 && test $$n -eq 0

# bin/sfclab-guest is the VM guests' init and agent (runtime vm copies it into guest images
# when it sits beside sfclab, built from the same source; sfclab itself otherwise).
build:
	$(GO) build -ldflags "-X github.com/sfclab/sfclab/internal/cli.Version=$(VERSION)" -o $(BIN) ./cmd/sfclab
	$(GO) build -ldflags "-s -w" -o bin/sfclab-guest ./cmd/sfclab-guest

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }

# Tests run for real as root against the kernel; packages run one at a time (2 cores).
# scripts/test.sh: the cluster's build (only ./runtime/kubernetes needs it) runs in the
# background, niced, while deps, the images, build, vet and every other package's tests run;
# ./runtime/kubernetes last. With everything installed and built the build is a no-op.
test:
	@GO=$(GO) MAKE=$(MAKE) ./scripts/test.sh

# The main job: reproduce study A (on Docker, netns beside; 3 runs x 30 s per scenario, ~20 minutes); the report lands in
# out/single-host-chain-TIME/report.md and report.html.
run: deps build
	./$(BIN) reproduce single-host-chain

# Speed and throughput figures: benchmarks, never timed unit tests. They deploy labs and
# measure, so they hold the host-wide lock other measuring runs take. Benchmark1000Nodes
# (./deploy/) deploys a generated 1,000-node lab; BenchmarkChain2VNF (./vnf/l4lb/) compares
# the load balancers in study A's 2-VNF chain, ratios from one interleaved run.
bench: deps build
	flock /tmp/sfclab-suite.lock $(GO) test -run '^$$' -bench . -benchtime 3x ./netdev/ ./deploy/ ./bench/... ./probe/... ./pktgen/ ./vnf/l4lb/
	flock /tmp/sfclab-suite.lock $(GO) test -run '^$$' -bench . -benchtime 100x ./api/...
	flock /tmp/sfclab-suite.lock $(GO) test -run '^$$' -bench . -benchtime 1x ./steer/

# Fuzzing: each target for FUZZTIME (plain go test, as in `make test`, runs only the seeds in
# testdata/fuzz). A crasher lands in the package's testdata/fuzz/TARGET: fix it and commit it.
FUZZTIME ?= 60s
FUZZ_TARGETS := ./spec:FuzzDecode ./experiment:FuzzDecode ./probe/iperf3:FuzzParse ./probe/ping:FuzzParse ./api:FuzzRequestBody
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} $${t##*:} for $(FUZZTIME)"; \
		nice -n 19 $(GO) test -timeout 0 -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done

# Rebuild the committed eBPF objects (steer/*_bpfel.{go,o}, probe/rtt/tcstamp/) from their bpf/*.c; only this
# target needs clang, llvm and libbpf-dev.
generate:
	./scripts/install-deps.sh --bpf
	$(GO) generate ./steer/... ./lb/... ./probe/rtt/tcstamp/... ./pktgen/...

clean:
	rm -rf bin
