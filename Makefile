# The README's commands. `make test` is what CI runs (.ci/run).

GO ?= go

# The suites whose tests wait on goroutines, timers and sockets: make
# test-stress runs them on a machine kept busy.
STRESS_PKGS = ./sim/... ./api/... ./doctor/... . ./internal/daemon/...
# The benchmarks that take minutes each: CPU over idle windows and runs at
# the scale of 1,000 to 10,000 pods.
LONG_BENCH = IdleCPU|DaemonRSS|ListContainers30k|Relist10k|SeedNodeChangedPods
# How long make fuzz runs each fuzz target.
FUZZTIME ?= 10s

.PHONY: test check test-stress bench bench-long fuzz demo

## test: format and vet checks, then every test with the race detector;
## each fuzz target runs its seed corpus as a test
test: check
	$(GO) test -race -count=1 ./...

check:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## test-stress: the timing-sensitive suites with the race detector, three
## times, while two CPU hogs keep both cores of a small machine busy; the
## hogs are killed however the tests end
test-stress:
	@sh -c 'while :; do :; done' & hog1=$$!; \
	sh -c 'while :; do :; done' & hog2=$$!; \
	trap 'kill $$hog1 $$hog2 2>/dev/null' EXIT INT TERM HUP; \
	echo "two CPU hogs: $$hog1 $$hog2"; \
	$(GO) test -race -count=3 -timeout 60m $(STRESS_PKGS)

## bench: the quick benchmarks, with allocations (a few minutes)
bench:
	$(GO) test -run '^$$' -bench . -skip '$(LONG_BENCH)' -benchmem -timeout 30m ./...

## bench-long: the idle-CPU and scale benchmarks (most of an hour)
bench-long:
	$(GO) test -run '^$$' -bench '$(LONG_BENCH)' -benchmem -benchtime 1x -timeout 90m ./...

## fuzz: every fuzz target of the repository, FUZZTIME (10s) each
fuzz:
	@$(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do \
	  for target in $$(cat $$dir/*_test.go 2>/dev/null | sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p'); do \
	    echo "== $$pkg $$target"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## demo: the daemon over the simulated runtime with churn
demo:
	$(GO) run ./cmd/pleg demo --duration 30s
