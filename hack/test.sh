#!/bin/sh
# make test after make check: the root module's tests with the race
# detector, then every fuzz target for CI_FUZZTIME executions (hack/fuzz.sh),
# while test/kube, then test/chart, then hack/image run their tests in the
# background, and test/otel beside them (it mostly waits: on a collector
# stopped for two minutes, on daemons killed and started again). test/kube's first run builds etcd and kube-apiserver, which
# fills the time the root's end-to-end tests spend waiting on their
# runtimes. The background output follows the root's, and the script fails
# if any part failed. Make passes every variable; the defaults are the
# Makefile's.
set -u
cd "$(dirname "$0")/.."
GO=${GO:-go}
TEST_TIMEOUT=${TEST_TIMEOUT:-40m}
CI_FUZZTIME=${CI_FUZZTIME:-3000x}
KUBE_TEST_MODULE=${KUBE_TEST_MODULE:-test/kube}
CHART_TEST_MODULE=${CHART_TEST_MODULE:-test/chart}
IMAGE_MODULE=${IMAGE_MODULE:-hack/image}
OTEL_TEST_MODULE=${OTEL_TEST_MODULE:-test/otel}

kubelog=$(mktemp)
(
	(cd "$KUBE_TEST_MODULE" && $GO test -race -count=1 -timeout "$TEST_TIMEOUT" ./...)
	k=$?
	echo "cd $CHART_TEST_MODULE && $GO test -race -count=1 ./..."
	(cd "$CHART_TEST_MODULE" && $GO test -race -count=1 -timeout "$TEST_TIMEOUT" ./...) || k=1
	echo "cd $IMAGE_MODULE && $GO test -race -count=1 ./..."
	(cd "$IMAGE_MODULE" && $GO test -race -count=1 -timeout "$TEST_TIMEOUT" ./...) && exit $k
) >"$kubelog" 2>&1 &
kube=$!
otellog=$(mktemp)
(cd "$OTEL_TEST_MODULE" && $GO test -race -count=1 -timeout "$TEST_TIMEOUT" ./...) >"$otellog" 2>&1 &
otel=$!
trap 'kill $kube $otel 2>/dev/null; rm -f "$kubelog" "$otellog"' EXIT INT TERM HUP

echo "$GO test -race -count=1 -timeout $TEST_TIMEOUT ./...   (and $KUBE_TEST_MODULE beside it)"
$GO test -race -count=1 -timeout "$TEST_TIMEOUT" ./...
root=$?
GO=$GO FUZZTIME=$CI_FUZZTIME hack/fuzz.sh
fuzz=$?
wait $kube
kubest=$?
echo "cd $KUBE_TEST_MODULE && $GO test -race -count=1 -timeout $TEST_TIMEOUT ./..."
cat "$kubelog"
wait $otel
otelst=$?
echo "cd $OTEL_TEST_MODULE && $GO test -race -count=1 -timeout $TEST_TIMEOUT ./..."
cat "$otellog"
[ $root -eq 0 ] && [ $fuzz -eq 0 ] && [ $kubest -eq 0 ] && [ $otelst -eq 0 ]
