#!/usr/bin/env bash
# bench/ab/ab.sh - two builds of the library, side by side in one process:
# the engine bench's workload (bench/engine/workload.h) decided in
# alternating blocks by build A and build B, so that the machine's noise
# falls on both alike. On a shared machine whose speed moves by 2x from one
# minute to the next, this is how a change to a hot path is measured.
#
#   bench/ab/ab.sh [-t | -B | -T | -o] [-u USERS] [-r ROUNDS] [-b BLOCKS] A B
#
# A and B are git revisions of this repository (HEAD, main~1, a hash...),
# `.` for the working tree as it is, or the path of a built libweir.a.
# -t measures weir_memstore_take() alone (a token bucket per user, as
# weir-bench's single column) instead of the engine's decide(); -B its
# batch call, weir_memstore_run() with 64 independent ops per call; -T
# the scaling of the single call from one thread to two (2T/1T); -o the
# engine's workload with the user's limit overridden by every request.
# USERS defaults to 1000000 (10000 keeps every counter in the caches),
# ROUNDS (separate processes, one line each, B set up first in every
# second) to 4, BLOCKS (pairs of 20,000 requests per process) to 200. Release builds (-O3 -DNDEBUG) go
# to a temporary directory that is removed at the end.
set -euo pipefail

users=1000000 rounds=4 blocks=200 workload= what= threads=1
while getopts "tBTou:r:b:" opt; do
    case $opt in
    t) workload=-DTAKE what=", weir_memstore_take" ;;
    B) workload="-DTAKE -DBATCH" what=", weir_memstore_run (64 ops per call)" ;;
    T) workload=-DTAKE what=", weir_memstore_take on 1 and 2 threads" threads=2 ;;
    o) workload=-DOVERRIDE what=", the user's limit overridden" ;;
    u) users=$OPTARG ;;
    r) rounds=$OPTARG ;;
    b) blocks=$OPTARG ;;
    *) sed -n '2,20p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { sed -n '2,20p' "$0" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-ab.XXXXXX")
trap 'rm -rf "$work"' EXIT

# library SPEC NAME -> prints the path of a libweir.a built from SPEC
library() {
    local spec=$1 name=$2 src
    if [ -f "$spec" ]; then
        echo "$spec"
        return
    fi
    src=$work/src-$name
    mkdir -p "$src"
    if [ "$spec" = . ]; then
        (cd "$root" && git ls-files -z --cached --others --exclude-standard |
            xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$src"
    else
        git -C "$root" archive "$spec" | tar -xf - -C "$src"
    fi
    cmake -S "$src" -B "$work/build-$name" -DCMAKE_BUILD_TYPE=Release -DWEIR_SANITIZE= \
        -DWEIR_TESTS=OFF >/dev/null
    cmake --build "$work/build-$name" --target weir_static -j "$(nproc)" >/dev/null
    echo "$work/build-$name/libweir.a"
}

lib_a=$(library "$1" A)
lib_b=$(library "$2" B)
for side in A B; do
    lib=$lib_a
    [ $side = B ] && lib=$lib_b
    gcc -O3 -DNDEBUG -DSIDE=$side -DUSERS="${users}u" $workload -I"$root/include" \
        -c "$here/side.c" -o "$work/side-$side.o"
    # one relocatable object per side, every symbol hidden but its entry points
    ld -r "$work/side-$side.o" --whole-archive "$lib" -o "$work/whole-$side.o"
    objcopy --keep-global-symbol=ab_setup_$side --keep-global-symbol=ab_run_$side \
        "$work/whole-$side.o" "$work/part-$side.o"
done
gcc -O2 "$here/main.c" "$work/part-A.o" "$work/part-B.o" \
    $(pkg-config --libs libxxhash yaml-0.1 hiredis) -lpthread -lm -o "$work/ab"

echo "A = $1, B = $2, $users users$what; $(date -u +%Y-%m-%dT%H:%M:%SZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
# Where a build's memory lies moves its speed by a few percent, and the
# build set up first gets other places than the second: the rounds take
# turns (B set up first in every second one, marked), so use an even count.
for round in $(seq "$rounds"); do
    b_first=$(((round + 1) % 2))
    mark=
    [ "$b_first" = 1 ] && mark="  (B set up first)"
    echo "$("$work/ab" "$blocks" 20000 "$threads" "$b_first")$mark"
done
