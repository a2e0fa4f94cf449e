#!/bin/sh
# hack/cold-test.sh: how long `make test` takes on a new machine, measured
# on this one without touching its caches. It clones the checkout's HEAD
# into a temporary directory and runs .ci/run there (make test, CI=true)
# with every cache fresh and temporary: Go's build cache (GOCACHE) and
# module cache (GOMODCACHE), the runtimes' cache (PLEG_CACHE_DIR),
# golangci-lint's, and XDG_CACHE_HOME for the rest. It prints the wall time
# and the CPU time of the run (user+sys of make and everything it started),
# then, with -warm, runs it again on the caches the first run filled: the
# warm time. It removes the temporary directory at the end, caches and all;
# the log stays (-log FILE, default _output/cold-test.log).
#
#	hack/cold-test.sh [-warm] [-log FILE] [-keep]
#
# -keep leaves the temporary directory in place and says where. A cold run
# of the whole suite takes both cores of a 2-core machine for about half an
# hour: measure a component alone when that is all you need (see
# docs/testing.md).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
warm=false
keep=false
log=$root/_output/cold-test.log
while [ $# -gt 0 ]; do
	case $1 in
	-warm) warm=true ;;
	-keep) keep=true ;;
	-log)
		shift
		log=$1
		;;
	*)
		echo "usage: hack/cold-test.sh [-warm] [-log FILE] [-keep]" >&2
		exit 2
		;;
	esac
	shift
done
case $log in /*) ;; *) log=$(pwd)/$log ;; esac
mkdir -p "$(dirname "$log")"
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
	echo "cold-test: the checkout has uncommitted changes; the run measures HEAD, $(git -C "$root" rev-parse --short HEAD), without them" >&2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pleg-cold-test.XXXXXX")
cleanup() {
	if $keep; then
		echo "cold-test: left in place: $tmp"
		return
	fi
	# The module cache's files are read-only, as Go writes them.
	chmod -R u+w "$tmp" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

git clone -q "$root" "$tmp/src"
mkdir -p "$tmp/gocache" "$tmp/gomodcache" "$tmp/pleg" "$tmp/golangci-lint" "$tmp/xdg"
export GOCACHE="$tmp/gocache" GOMODCACHE="$tmp/gomodcache" PLEG_CACHE_DIR="$tmp/pleg" \
	GOLANGCI_LINT_CACHE="$tmp/golangci-lint" XDG_CACHE_HOME="$tmp/xdg" CI=true

# run NAME: .ci/run in the clone, timed, its output to the terminal and the
# log; prints the figures.
run() {
	name=$1
	echo "cold-test: $name run of $(git -C "$tmp/src" log -1 --format='%h %s') in $tmp/src" | tee -a "$log"
	t0=$(date +%s)
	set +e
	if [ -x /usr/bin/time ]; then
		(cd "$tmp/src" && /usr/bin/time -f 'cold-test: cpu user %U s, sys %S s' ./.ci/run) 2>&1 | tee -a "$log"
	else
		(cd "$tmp/src" && ./.ci/run) 2>&1 | tee -a "$log"
	fi
	set -e
	t1=$(date +%s)
	# The exit status of .ci/run, not tee's: the log's last line of make
	# test says ok or FAILED.
	status=FAILED
	tail -n 3 "$log" | grep -q '^== \[.*\] make test: ok$' && status=ok
	cpu=$(tail -n 1 "$log" | sed -n 's/^cold-test: cpu user \([0-9.]*\) s, sys \([0-9.]*\) s$/\1 \2/p')
	w=$((t1 - t0))
	if [ -n "$cpu" ]; then
		# shellcheck disable=SC2086 # two numbers
		cpumin=$(echo $cpu | awk '{ printf "%.1f", ($1 + $2) / 60 }')
		echo "cold-test: $name: $status, wall $((w / 60))m$(printf %02d $((w % 60)))s, CPU $cpumin min (user+sys)" | tee -a "$log"
	else
		echo "cold-test: $name: $status, wall $((w / 60))m$(printf %02d $((w % 60)))s" | tee -a "$log"
	fi
	[ $status = ok ]
}

: >"$log"
echo "cold-test: fresh caches in $tmp (GOCACHE, GOMODCACHE, PLEG_CACHE_DIR, GOLANGCI_LINT_CACHE, XDG_CACHE_HOME); log $log"
rc=0
run cold || rc=1
if $warm; then
	run warm || rc=1
fi
exit $rc
