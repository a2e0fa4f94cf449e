#!/bin/sh
# make test-stress: STRESS_PKGS with the race detector, three times, while
# two CPU hogs keep both cores of a small machine busy; the hogs are killed
# however the tests end.
set -u
cd "$(dirname "$0")/.."
GO=${GO:-go}
STRESS_PKGS=${STRESS_PKGS:-./sim/... ./api/... ./doctor/... . ./daemon/...}
sh -c 'while :; do :; done' &
hog1=$!
sh -c 'while :; do :; done' &
hog2=$!
trap 'kill $hog1 $hog2 2>/dev/null' EXIT INT TERM HUP
echo "two CPU hogs: $hog1 $hog2"
# STRESS_PKGS is a list of packages: split on spaces.
# shellcheck disable=SC2086
$GO test -race -count=3 -timeout 60m $STRESS_PKGS
