# The README's commands. `make test` is what CI runs (.ci/run).

GO ?= go

.PHONY: test test-matrix check bench demo fuzz

# The end-to-end tests build and start their runtimes (internal/runtimetest):
# the first run builds containerd and CRI-O into $(PLEG_CACHE_DIR), or
# .cache, which takes minutes.
TEST_TIMEOUT ?= 40m

## test: format and vet checks, then every test with the race detector;
## the end-to-end tests run against containerd 1.7 and the newest 2.x and
## CRI-O with pod events on and off (PLEG_CONTAINERD_VERSIONS and
## PLEG_CRIO_VERSIONS choose others)
test: check
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

## test-matrix: the runtime harness and end-to-end tests against every
## containerd line in the field (1.7, 2.0, 2.1, 2.2, 2.3, 2.4) and CRI-O
test-matrix:
	PLEG_CONTAINERD_VERSIONS=all $(GO) test -race -count=1 -timeout 90m ./internal/runtimetest/ ./test/e2e/

check:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## fuzz: each fuzz target for FUZZTIME (make test runs their seed corpora)
FUZZTIME ?= 10s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzLeanDecode$$' -fuzztime $(FUZZTIME) ./runtime/cri/
	$(GO) test -run '^$$' -fuzz '^FuzzLeanDecodeSandboxes$$' -fuzztime $(FUZZTIME) ./runtime/cri/

## bench: every benchmark, with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## demo: the daemon over the simulated runtime with churn
demo:
	$(GO) run ./cmd/pleg demo --duration 30s
