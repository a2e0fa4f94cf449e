#!/bin/sh
# make test: make check and every test, ordered so that a cold run (a new
# machine: empty Go caches, no ~/.cache/pleg) compiles each package once
# and overlaps the suites' waits with the builds; a warm run is the same
# commands finding everything built. Make passes every variable; the
# defaults are the Makefile's.
#
# 1. hack/prebuild, in the background from the start: Prometheus, the
#    newest containerd, CRI-O, containerd 1.7, critest, into the runtimes'
#    cache, a line for each (what, how long it took). Their builds share
#    next to nothing with pleg's, so they fill the time make vet spends on
#    module downloads and on compiles that wait on one another.
# 2. make vet: gofmt, license headers, go vet of every module, which
#    compiles the dependencies of every module's tests.
# 3. Then, all at once: test/kube/prebuild (etcd and the Kubernetes
#    components as one program, then helm) in the background: after vet,
#    which has compiled client-go and the rest of what the components
#    share with pleg, as two builds of the same packages at once would
#    compile them twice. make lint, test/kube (once those are built),
#    test/otel (it mostly waits: on a collector stopped for two minutes,
#    on daemons killed and started again), and hack/image then test/chart
#    (helm built), each in the background; in the foreground the root module's tests with the race
#    detector, then every fuzz target for CI_FUZZTIME executions
#    (hack/fuzz.sh). A suite that needs a program still being built waits
#    on the cache's lock for it. A line says when each part ended; the
#    background output follows the root's. The script fails if any part
#    failed, lint included.
#
# The nested modules (test/kube, test/chart, test/otel, hack/image) run
# without -race: their test binaries are harnesses around real programs,
# and under -race each compiled client-go, helm or the collector once
# more (14.5 CPU-minutes of a cold run) for harness code. pleg's own
# packages, including what test/kube runs of them in-process, are tested
# under -race in the root module. docs/testing.md has the figures.
set -u
cd "$(dirname "$0")/.."
GO=${GO:-go}
MAKE=${MAKE:-make}
TEST_TIMEOUT=${TEST_TIMEOUT:-40m}
CI_FUZZTIME=${CI_FUZZTIME:-3000x}
KUBE_TEST_MODULE=${KUBE_TEST_MODULE:-test/kube}
CHART_TEST_MODULE=${CHART_TEST_MODULE:-test/chart}
IMAGE_MODULE=${IMAGE_MODULE:-hack/image}
OTEL_TEST_MODULE=${OTEL_TEST_MODULE:-test/otel}

start=$(date +%s)
# say prints a progress line with the time since make test began.
say() {
	s=$(($(date +%s) - start))
	printf '== [%dm%02ds] %s\n' $((s / 60)) $((s % 60)) "$*"
}
logs=$(mktemp -d)
pids=""
trap 'kill $pids 2>/dev/null; rm -rf "$logs"' EXIT
trap 'exit 130' INT TERM HUP

# lane NAME FUNCTION: runs FUNCTION in the background, its output into
# a log that is printed at the end, and a line when it ends.
lane() {
	(
		"$2" >"$logs/$1.log" 2>&1
		st=$?
		if [ $st -eq 0 ]; then say "$1: ok"; else say "$1: FAILED (exit $st)"; fi
		exit $st
	) &
	pids="$pids $!"
}

# The prebuild program is compiled before make vet starts, not beside
# it: both compile the standard library first.
say "prebuild: building the programs the suites run, in the background, once per machine"
$GO build -o "$logs/prebuild" ./hack/prebuild || exit 1
"$logs/prebuild" &
prebuild=$!
pids="$pids $prebuild"

say "make vet"
$MAKE --no-print-directory vet || exit 1

(
	cd "$KUBE_TEST_MODULE" && $GO run ./prebuild
	: >"$logs/kubebuild.done"
) &
kubebuild=$!
pids="$pids $kubebuild"
# after_kubebuild waits until test/kube/prebuild has ended (built, or
# failed: then the tests build and fail with the reason), so that a test
# binary's -timeout does not run while it waits for the Kubernetes
# components or helm on a busy machine.
after_kubebuild() {
	while [ ! -e "$logs/kubebuild.done" ]; do sleep 5; done
}

lint() { $MAKE --no-print-directory lint; }
# test/kube's packages mostly wait: on API servers and kubelets, on the
# incident suite's minutes of a runtime stopped and a shim stopped. Three
# at a time, so that the longest (the root package's ten minutes, the
# incident suite's five to eight) run side by side instead of one queuing
# behind the other, past the quarter of an hour a warm run has.
kube_tests() {
	after_kubebuild
	cd "$KUBE_TEST_MODULE" && $GO test -p 3 -count=1 -timeout "$TEST_TIMEOUT" ./...
}
otel_tests() {
	cd "$OTEL_TEST_MODULE" && $GO test -count=1 -timeout "$TEST_TIMEOUT" ./...
}
# hack/image first: test/chart's doc commands run helm, which
# test/kube/prebuild builds after the Kubernetes components.
chart_image_tests() {
	echo "cd $IMAGE_MODULE && $GO test -count=1 ./..."
	(cd "$IMAGE_MODULE" && $GO test -count=1 -timeout "$TEST_TIMEOUT" ./...)
	k=$?
	after_kubebuild
	echo "cd $CHART_TEST_MODULE && $GO test -count=1 ./..."
	(cd "$CHART_TEST_MODULE" && $GO test -count=1 -timeout "$TEST_TIMEOUT" ./...) && return $k
}
say "make lint, $KUBE_TEST_MODULE, $OTEL_TEST_MODULE, $IMAGE_MODULE then $CHART_TEST_MODULE: in the background, their output at the end"
lane lint lint
lintpid=$!
lane kube kube_tests
kube=$!
lane otel otel_tests
otel=$!
lane image-chart chart_image_tests
chart=$!

say "$GO test -race -count=1 -timeout $TEST_TIMEOUT ./..."
$GO test -race -count=1 -timeout "$TEST_TIMEOUT" ./...
root=$?
say "fuzz targets, $CI_FUZZTIME executions each"
GO=$GO FUZZTIME=$CI_FUZZTIME hack/fuzz.sh
fuzz=$?

status=0
[ $root -eq 0 ] && [ $fuzz -eq 0 ] || status=1
wait $lintpid || status=1
say "make lint"
cat "$logs/lint.log"
wait $kube || status=1
say "cd $KUBE_TEST_MODULE && $GO test -p 3 -count=1 -timeout $TEST_TIMEOUT ./..."
cat "$logs/kube.log"
wait $otel || status=1
say "cd $OTEL_TEST_MODULE && $GO test -count=1 -timeout $TEST_TIMEOUT ./..."
cat "$logs/otel.log"
wait $chart || status=1
cat "$logs/image-chart.log"
# A failed prebuild is the tests' to report: a suite whose program could
# not be built tried again and failed with the reason.
wait $prebuild
wait $kubebuild
say "make test: $([ $status -eq 0 ] && echo ok || echo FAILED)"
exit $status
