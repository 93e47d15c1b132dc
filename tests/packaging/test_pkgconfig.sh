#!/usr/bin/env bash
# test_pkgconfig.sh BUILD_DIR - a program built against libweir with only
# what pkg-config says, shared and static: from the build tree
# (weir-uninstalled.pc), then from a prefix `cmake --install` filled (and
# its DESTDIR staging). SAN_FLAGS: the sanitizers the build used (a
# program linking an instrumented library needs their runtime too).
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-cc}
san=${SAN_FLAGS:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
passes=0
pass() { echo "ok $1"; passes=$((passes + 1)); }
fail() { echo "FAILED $1"; fails=$((fails + 1)); }

# check NAME ENV...: builds hello.c shared and static and runs both
check() {
    local name=$1
    shift
    local cflags libs static
    cflags=$(env "$@" pkg-config --cflags weir)
    libs=$(env "$@" pkg-config --libs weir)
    static=$(env "$@" pkg-config --libs --static weir)
    local libdir=${libs#-L}
    libdir=${libdir%% *}
    # shellcheck disable=SC2086
    $cc $san $cflags "$here/hello.c" -o "$tmp/$name-shared" $libs
    # shellcheck disable=SC2086
    $cc $san $cflags "$here/hello.c" -o "$tmp/$name-static" "$libdir/libweir.a" \
        $(sed 's/-lweir//' <<<"$static")
    for kind in shared static; do
        if out=$(LD_LIBRARY_PATH="$libdir" "$tmp/$name-$kind") &&
            [[ $out == "weir "*": 2 of 3 allowed" ]]; then
            pass "$name $kind: $out"
        else
            fail "$name $kind: '$out'"
        fi
    done
}

# the build tree: pkg-config prefers weir-uninstalled.pc
check build-tree PKG_CONFIG_PATH="$build"

# an installed prefix, wherever it is (the .pc finds its prefix itself)
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc=$(dirname "$(find "$tmp/prefix" -name weir.pc)")
for f in include/weir/weir.h include/weir/adapters/libuv.h bin/weir share/man/man1/weir.1 \
    lib/systemd/system/weir.service; do
    [ -e "$tmp/prefix/$f" ] && pass "installed $f" || fail "installed $f"
done
check prefix PKG_CONFIG_PATH="$pc" PKG_CONFIG_DISABLE_UNINSTALLED=1

# a staged install (DESTDIR), as packages are built
DESTDIR="$tmp/stage" cmake --install "$build" --prefix /opt/weir >/dev/null
[ -f "$tmp/stage/opt/weir/include/weir/weir.h" ] && pass "DESTDIR staging" || fail "DESTDIR staging"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
