#!/bin/sh
# Fails naming each Go file of the repository (every module, tracked or not
# yet added, not ignored) that does not start with the license header
# CONTRIBUTING.md gives: the copyright line, the SPDX line, a blank line.
set -eu
cd "$(dirname "$0")/.."
missing=0
for f in $(git ls-files --cached --others --exclude-standard -- '*.go'); do
	[ -f "$f" ] || continue # deleted in the work tree, not yet in the index
	if ! sed -n '1,3p' "$f" | awk '
		NR == 1 && !/^\/\/ Copyright [0-9][0-9][0-9][0-9] The pleg Authors\.$/ { bad = 1 }
		NR == 2 && $0 != "// SPDX-License-Identifier: Apache-2.0" { bad = 1 }
		NR == 3 && $0 != "" { bad = 1 }
		END { exit (bad || NR < 3) }'; then
		echo "$f: no license header (see CONTRIBUTING.md)" >&2
		missing=1
	fi
done
exit $missing
