#!/bin/sh
# make fuzz: every fuzz target of the module (each func Fuzz... of each
# package's tests) for FUZZTIME, a duration or Nx executions; the first
# failure ends the run.
set -u
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
$GO list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do
	for target in $(cat "$dir"/*_test.go 2>/dev/null | sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p'); do
		echo "== $pkg $target"
		$GO test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" "$pkg" || exit 1
	done
done
