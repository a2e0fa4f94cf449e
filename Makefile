# The README's commands. `make test` is what CI runs (.ci/run).

GO ?= go

.PHONY: test check bench demo

## test: format and vet checks, then every test with the race detector
test: check
	$(GO) test -race -count=1 ./...

check:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## bench: every benchmark, with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## demo: the daemon over the simulated runtime with churn
demo:
	$(GO) run ./cmd/pleg demo --duration 30s
