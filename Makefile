# The README's commands. `make test` is what CI runs (.ci/run). make help
# lists the targets. The longer shell programs are in hack/*.sh.

GO ?= go

# The suites whose tests wait on goroutines, timers and sockets: make
# test-stress runs them on a machine kept busy.
STRESS_PKGS = ./sim/... ./api/... ./doctor/... . ./daemon/...
# The benchmarks that take minutes each: CPU over idle windows, runs at the
# scale of 1,000 to 10,000 pods, and restarts on containerd for a while.
LONG_BENCH = IdleCPU|DaemonRSS|ListContainers30k|Relist10k|SeedNodeChangedPods|RestartLatency
# How long make fuzz runs each fuzz target, and make test (so CI) too. CI
# counts executions: with a duration, Go 1.26's fuzz coordinator can fail
# a target with "context deadline exceeded" at the deadline on a busy
# machine (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 10s
CI_FUZZTIME ?= 3000x

.PHONY: build kubectl-pleg image release test test-matrix check vet lint test-stress bench bench-long fuzz demo generate fleet kubelet-on-sim incidents help

# make alone runs make test, as it did when test was merely the first
# target: help is listed last and does not take its place.
.DEFAULT_GOAL := test

# test/kube is a Go module of its own: it requires k8s.io/kubernetes and
# etcd, to test reporting into a real kube-apiserver, and the product's
# module does not. ./... from the root does not descend into it. Nor into
# test/chart, the Helm chart's and the dashboard's module (helm's and
# Grafana's Go modules), kept out of test/kube's, whose build list builds
# kube-apiserver.
KUBE_TEST_MODULE = test/kube
CHART_TEST_MODULE = test/chart
# test/otel, the OTLP export against a real OpenTelemetry Collector built
# from its Go modules: a module of its own, so that the collector's
# dependencies stay out of the product's go.mod.
OTEL_TEST_MODULE = test/otel
# hack/image, the program that builds and pushes the image, with
# go-containerregistry and the SPDX library: a module of its own too, so
# that neither the product's go.mod nor tools/go.mod takes them.
IMAGE_MODULE = hack/image

# The end-to-end tests build and start their runtimes (internal/testing/runtimetest):
# the first run builds containerd and CRI-O into $(PLEG_CACHE_DIR), or
# ~/.cache/pleg, which takes minutes.
TEST_TIMEOUT ?= 40m

## test: make vet, then make lint and every test: the root module's with
## the race detector; each fuzz target runs its seed corpus as a test,
## then fuzzes for CI_FUZZTIME (3,000 executions); the end-to-end tests run
## against containerd 1.7 and the newest 2.x and CRI-O with pod events on
## and off (PLEG_CONTAINERD_VERSIONS and PLEG_CRIO_VERSIONS choose others).
## Beside them, without -race (harnesses around real programs; see
## docs/testing.md): test/kube, test/otel (the export against a real
## OpenTelemetry Collector), test/chart then hack/image. The third-party
## programs the suites run are built once per machine, in the background
## from the start (hack/prebuild, then test/kube/prebuild), each with a
## line saying what and how long; the background output follows the root
## module's (hack/test.sh). hack/cold-test.sh measures a cold run.
test:
	@GO='$(GO)' MAKE='$(MAKE)' TEST_TIMEOUT='$(TEST_TIMEOUT)' CI_FUZZTIME='$(CI_FUZZTIME)' KUBE_TEST_MODULE='$(KUBE_TEST_MODULE)' \
	  CHART_TEST_MODULE='$(CHART_TEST_MODULE)' IMAGE_MODULE='$(IMAGE_MODULE)' OTEL_TEST_MODULE='$(OTEL_TEST_MODULE)' hack/test.sh

## test-matrix: the runtime harness and end-to-end tests against every
## containerd line in the field (1.7, 2.0, 2.1, 2.2, 2.3, 2.4) and CRI-O
test-matrix:
	PLEG_CONTAINERD_VERSIONS=all $(GO) test -race -count=1 -timeout 90m ./internal/testing/runtimetest/ ./test/e2e/

## build: ./pleg, with the version `git describe` gives (the tag, or the
## tag and the commits since, or the commit alone; -dirty for local
## changes) and the commit stamped in: `pleg version` prints them
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
VERSION_PKG = github.com/plegkit/pleg/internal/version
build:
	$(GO) build -ldflags "-X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).revision=$(REVISION)" -o pleg ./cmd/pleg

## kubectl-pleg: ./kubectl-pleg, the kubectl plugin (kubectl pleg doctor
## NODE, recordings NODE, bundle NODE); put it on PATH, or install it with
## krew from hack/krew/pleg.yaml
kubectl-pleg:
	$(GO) build -ldflags "-X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).revision=$(REVISION)" -o kubectl-pleg ./cmd/kubectl-pleg

## image: pleg's image, built without a container engine by hack/image
## (go-containerregistry): ./cmd/pleg cross-compiled static for each of
## IMAGE_PLATFORMS (linux/amd64,linux/arm64), stamped as make build stamps
## it, in one layer; an OCI index over them, the same digest for every
## build of a commit (every timestamp SOURCE_DATE_EPOCH, or else the
## commit's time). Into IMAGE_DIR (_output/image): oci/ (an OCI image
## layout), pleg.tar (the same as an OCI archive: `ctr -n k8s.io images
## import pleg.tar` names it IMAGE_REPO:IMAGE_TAG), sbom.spdx.json (SPDX
## 2.3), digest (the index's, sha256:...) and ref (IMAGE_REPO:IMAGE_TAG).
## IMAGE_TAG defaults to VERSION (git describe), not the chart's
## appVersion: a build between tags must not pass for a release.
IMAGE_REPO ?= ghcr.io/plegkit/pleg
IMAGE_TAG ?= $(VERSION)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_DIR ?= _output/image
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
image:
	cd $(IMAGE_MODULE) && $(GO) run . build -go '$(GO)' -src '$(CURDIR)' -out '$(abspath $(IMAGE_DIR))' \
	  -repo '$(IMAGE_REPO)' -tag '$(IMAGE_TAG)' -platforms '$(IMAGE_PLATFORMS)' \
	  -version '$(VERSION)' -revision '$(REVISION)' -created '$(SOURCE_DATE_EPOCH)'

## release: what a tag's workflow runs (.github/workflows/release.yml):
## make image, then hack/image release: checks that VERSION is a release
## the chart and CHANGELOG.md name, pushes the image (IMAGE_REPO) with its
## SBOM attached and the chart (CHART_REPO, with HELM), and signs both as
## cosign does with SIGNING_KEY (an ECDSA P-256 key, PKCS#8 PEM); the
## public key is written to _output/chart/cosign.pub. RELEASE_FLAGS adds
## flags (-plain-http for a registry on loopback).
CHART_REPO ?= oci://ghcr.io/plegkit/charts
SIGNING_KEY ?=
HELM ?= helm
RELEASE_FLAGS ?=
release: image
	cd $(IMAGE_MODULE) && $(GO) run . release -src '$(CURDIR)' -dir '$(abspath $(IMAGE_DIR))' -tag '$(VERSION)' \
	  -chart-repo '$(CHART_REPO)' -key '$(abspath $(SIGNING_KEY))' -helm '$(HELM)' -out '$(CURDIR)/_output/chart' $(RELEASE_FLAGS)

## check: make vet, then make lint
check: vet lint

## vet: gofmt, the license header of every Go file, every module's go.mod
## tidy, go vet of the five modules
vet:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@hack/check-license.sh
	@for m in $(LINT_MODULES); do (cd $$m && $(GO) mod tidy -diff >/dev/null) || { echo "go.mod not tidy in $$m: cd $$m && go mod tidy"; exit 1; }; done
	$(GO) vet ./...
	cd $(KUBE_TEST_MODULE) && $(GO) vet ./...
	cd $(CHART_TEST_MODULE) && $(GO) vet ./...
	cd $(IMAGE_MODULE) && $(GO) vet ./...
	cd $(OTEL_TEST_MODULE) && $(GO) vet ./...

# golangci-lint is built from tools/go.mod (its version pinned there, its
# dependencies out of the product's go.mod) into Go's build cache, once.
GOLANGCI_LINT = $(GO) tool -modfile=$(CURDIR)/tools/go.mod golangci-lint
LINT_MODULES = . $(KUBE_TEST_MODULE) $(CHART_TEST_MODULE) $(IMAGE_MODULE) $(OTEL_TEST_MODULE) tools
# actionlint checks the release workflow, which never runs here: its
# version is pinned by hack/image/go.mod's tool directive.
ACTIONLINT = $(GO) tool -modfile=$(CURDIR)/$(IMAGE_MODULE)/go.mod actionlint

## lint: golangci-lint over every module, actionlint over the workflows
# --allow-serial-runners: another golangci-lint on the machine (another
# checkout's make test) is waited for, not an error.
lint:
	@for m in $(LINT_MODULES); do \
	  echo "golangci-lint run ($$m)"; \
	  (cd $$m && $(GOLANGCI_LINT) run --allow-serial-runners --config $(CURDIR)/.golangci.yml ./...) || exit 1; \
	done
	@echo "actionlint (.github/workflows)"; $(ACTIONLINT) -no-color .github/workflows/*.yml

## generate: what is generated from the chart and the dashboard's code:
## deploy/'s manifests, deploy/prometheus/'s rules (the chart's, rendered
## with its defaults), the dashboard in deploy/grafana/ and its copy in the
## chart, the chart's golden renders (test/chart's -update)
generate:
	cd $(CHART_TEST_MODULE) && $(GO) test -count=1 ./... -update

## test-stress: the timing-sensitive suites with the race detector, three
## times, while two CPU hogs keep both cores of a small machine busy; the
## hogs are killed however the tests end
test-stress:
	@GO='$(GO)' STRESS_PKGS='$(STRESS_PKGS)' hack/test-stress.sh

## bench: the quick benchmarks, with allocations (a few minutes)
bench:
	$(GO) test -run '^$$' -bench . -skip '$(LONG_BENCH)' -benchmem -timeout 30m ./...

## bench-long: the idle-CPU and scale benchmarks (most of an hour)
bench-long:
	$(GO) test -run '^$$' -bench '$(LONG_BENCH)' -benchmem -benchtime 1x -timeout 90m ./...

## fuzz: every fuzz target of the repository, FUZZTIME (10s) each
fuzz:
	@GO='$(GO)' FUZZTIME='$(FUZZTIME)' hack/fuzz.sh

## fleet: 10, 50 and 100 nodes on this machine, each a simulated runtime
## and its own pleg run, reporting to one kube-apiserver and scraped by one
## Prometheus: requests at rest, while every runtime hangs and as they
## recover, CPU and memory per daemon, series and bytes per scrape; prints
## the tables of docs/fleet.md (half an hour on 2 cores).
## make test runs its 10-node version, with a short stretch at rest.
## FLEET_MODE=evented or FLEET_RELIST=5s if the machine cannot keep up
## (the harness says so); FLEET_OUT=file also writes the table there.
FLEET_NODES ?= 10,50,100
FLEET_REST ?= 5m30s
FLEET_MODE ?= generic
FLEET_RELIST ?= 1s
FLEET_OUT ?=
fleet:
	cd $(KUBE_TEST_MODULE) && PLEG_FLEET_NODES=$(FLEET_NODES) PLEG_FLEET_REST=$(FLEET_REST) \
	  PLEG_FLEET_MODE=$(FLEET_MODE) PLEG_FLEET_RELIST=$(FLEET_RELIST) PLEG_FLEET_OUT=$(abspath $(FLEET_OUT)) \
	  $(GO) test -count=1 -v -run '^TestFleet$$' -timeout 120m ./fleet/

## kubelet-on-sim: a real kubelet with pleg sim as its runtime (the seed
## node's latencies), grown to 100, 500 and 1,000 pods with pleg beside
## it: time to all Running, the kubelet's and pleg's relist p50/p99, and
## "PLEG is not healthy" (docs/kubelet-on-sim.md; root, some 20 minutes).
## KUBELET_ON_SIM_SIZES and KUBELET_ON_SIM_STEADY choose others.
KUBELET_ON_SIM_SIZES ?= 100,500,1000
KUBELET_ON_SIM_STEADY ?= 1m
kubelet-on-sim:
	cd $(KUBE_TEST_MODULE) && PLEG_KUBELET_ON_SIM=1 PLEG_KUBELET_ON_SIM_SIZES=$(KUBELET_ON_SIM_SIZES) \
	  PLEG_KUBELET_ON_SIM_STEADY=$(KUBELET_ON_SIM_STEADY) \
	  $(GO) test -count=1 -run '^$$' -bench '^BenchmarkKubeletRelist$$' -benchtime 1x -timeout 90m ./simnode/

## incidents: every cause of "PLEG is not healthy" this machine can bring
## about, each on a node of its own of one real cluster, side by side:
## when pleg's condition turned on, when the first page fired, when the
## kubelet turned the node NotReady (or that it stayed Ready), doctor's
## first finding, the recording; prints the table of docs/incidents.md
## (root). make test runs two of them (the runtime stopped, a shim
## stopped). INCIDENTS chooses others (comma-separated names).
INCIDENTS ?= all
incidents:
	cd $(KUBE_TEST_MODULE) && PLEG_INCIDENTS=$(INCIDENTS) \
	  $(GO) test -count=1 -v -parallel 16 -run '^TestIncidents$$' -timeout 90m ./incident/

## demo: the daemon over the simulated runtime with churn
demo:
	$(GO) run ./cmd/pleg demo --duration 30s

## help: every target and what it does: the first line of each block of
## these lines names its target
help:
	@awk '/^## / { sub(/^## /, ""); if (!block) { name = $$1; sub(/:$$/, "", name); sub(/^[^ ]+ */, "") } else name = ""; printf "%-16s %s\n", name, $$0; block = 1; next } { block = 0 }' $(firstword $(MAKEFILE_LIST))
