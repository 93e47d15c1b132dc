#!/usr/bin/env bash
# Fails when a tracked C file differs from what clang-format makes of it.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.c' '*.h' 2>/dev/null || true)
if [ -z "$files" ]; then
    files=$(find include lib tools tests bench -name '*.[ch]' 2>/dev/null)
fi
bad=0
for f in $files; do
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f (run 'make format')"
        bad=1
    fi
done
if [ "$bad" -eq 0 ]; then
    echo "format: $(echo "$files" | wc -w) files follow .clang-format"
fi
exit $bad
