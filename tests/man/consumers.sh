#!/bin/sh
# tests/man/consumers.sh — part of `make test-install`: builds programs the way the
# documentation tells a user to, against a fresh install in a temporary prefix, and runs
# them: fheplan-explicit(7)'s two build lines (the static one then run with every
# libfheplan.so removed from the prefix), the CMake package (cmake/consumer: one program
# on fheplan::fheplan, one on fheplan::static) and README's "Using the library" program,
# whose output must be the one README shows.
#
# Environment (set by the Makefile): MAKE, BUILD, CC, SAN (optional), FHEPLAN_DEVICE.
set -u
MAKE=${MAKE:-make}
BUILD=${BUILD:-build}
CC=${CC:-cc}
SAN=${SAN:-}
root=$(pwd)
fail=0
say() { printf '%s\n' "$*"; }
bad() { say "FAIL: $*"; fail=$((fail + 1)); }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
if ! $MAKE --no-print-directory install BUILD="$BUILD" PREFIX="$prefix" >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log"
    bad "make install PREFIX=$prefix"
    exit 1
fi
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig FHEPLAN_DEVICE=emu:1
unset LD_LIBRARY_PATH

# The display that follows a `.\" build-line: KIND` marker, un-escaped as mandoc shows it
# (\e a backslash), continuation lines joined.
build_line() { # kind
    awk -v kind="$1" '
        state == 1 && /^\.Bd -literal/ { state = 2; next }
        state == 2 && /^\.Ed/ { exit }
        state == 2 { gsub(/\\e/, "\\"); print }
        $0 ~ "^\\.\\\\\" build-line: " kind " " { state = 1 }' man/fheplan-explicit.7 |
        sed -e ':a' -e '/\\$/N; s/\\\n//; ta'
}

# ---- fheplan-explicit(7)'s build lines ---------------------------------------------------
sh tests/man/extract.sh "$tmp/x" man/fheplan-explicit.7 || bad "extract.sh fheplan-explicit.7"
dir=$tmp/x/fheplan-explicit
for kind in static shared; do
    line=$(build_line $kind)
    case $line in
    "cc "*adopt.c*) ;;
    *) bad "fheplan-explicit(7): no '.\\\" build-line: $kind' display with a cc line for adopt.c"; continue ;;
    esac
    # the documented line as written; only the compiler (and sanitizer flags) are ours
    cmd="$CC $SAN ${line#cc } -o adopt-$kind"
    if ! (cd "$dir" && sh -c "$cmd") >"$tmp/$kind.log" 2>&1; then
        cat "$tmp/$kind.log"
        bad "fheplan-explicit(7) $kind build line: $cmd"
        continue
    fi
    say "ok   fheplan-explicit(7) $kind build line: $line"
done
if [ -x "$dir/adopt-shared" ]; then
    if ldd "$dir/adopt-shared" | grep -q "libfheplan.so.* => $prefix/lib/"; then
        (cd "$dir" && ./adopt-shared >adopt.out 2>&1 && diff -u adopt.expect adopt.out) ||
            bad "adopt (shared build line) output"
    else
        ldd "$dir/adopt-shared"
        bad "adopt (shared build line) does not load $prefix/lib/libfheplan.so"
    fi
fi
if [ -x "$dir/adopt-static" ]; then
    rm -f "$prefix"/lib/libfheplan.so*
    if ldd "$dir/adopt-static" | grep -q libfheplan; then
        ldd "$dir/adopt-static"
        bad "adopt (static build line) still needs libfheplan.so"
    fi
    (cd "$dir" && ./adopt-static >adopt.out 2>&1 && diff -u adopt.expect adopt.out) ||
        bad "adopt (static build line) without libfheplan.so in the prefix"
    say "ok   adopt.c linked by the static line runs with no libfheplan.so installed"
    # the shared library back for what follows
    $MAKE --no-print-directory install BUILD="$BUILD" PREFIX="$prefix" >/dev/null 2>&1 ||
        bad "make install (again)"
fi

# ---- the CMake package ------------------------------------------------------------------
if ! command -v cmake >/dev/null 2>&1; then
    bad "cmake not found (make deps installs it)"
else
    cb=$tmp/cmake-build
    if cmake -S cmake/consumer -B "$cb" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$CC" \
            -DCMAKE_C_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="$SAN" >"$tmp/cmake.log" 2>&1 &&
        cmake --build "$cb" >>"$tmp/cmake.log" 2>&1; then
        out=$("$cb/consumer_shared" 2>&1) || bad "cmake consumer_shared: $out"
        ldd "$cb/consumer_shared" | grep -q "libfheplan.so.* => $prefix/lib/" ||
            bad "cmake consumer_shared does not load the installed libfheplan.so"
        ldd "$cb/consumer_static" | grep -q libfheplan &&
            bad "cmake consumer_static needs libfheplan.so"
        out2=$("$cb/consumer_static" 2>&1) || bad "cmake consumer_static: $out2"
        say "ok   find_package(fheplan): fheplan::fheplan and fheplan::static ($out)"
    else
        cat "$tmp/cmake.log"
        bad "cmake/consumer against $prefix"
    fi
    # a request for another major version must not find this one
    mkdir -p "$tmp/v"
    printf '%s\n' 'cmake_minimum_required(VERSION 3.10)' 'project(v C)' \
        'find_package(fheplan 1.0 REQUIRED)' >"$tmp/v/CMakeLists.txt"
    if cmake -S "$tmp/v" -B "$tmp/v/b" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>&1; then
        bad "find_package(fheplan 1.0) accepted fheplan $(sed -n 's/^#define FHEPLAN_VERSION "\(.*\)"/\1/p' include/fheplan/version.h)"
    fi
fi

# ---- README's "Using the library" -------------------------------------------------------
# The first ```c block of the section is the program, the first ```text block what it prints.
block() { # fence
    awk -v fence="$1" '
        /^## / { in_sec = ($0 == "## Using the library") }
        in_sec && state == 1 && /^```$/ { exit }
        in_sec && state == 1 { print; next }
        in_sec && $0 == "```" fence { state = 1 }' README.md
}
rd=$tmp/readme
mkdir -p "$rd"
block c >"$rd/using.c"
block text >"$rd/using.expect"
if [ ! -s "$rd/using.c" ] || [ ! -s "$rd/using.expect" ]; then
    bad "README.md: 'Using the library' has no \`\`\`c program or no \`\`\`text output"
elif ! (cd "$rd" && $CC -std=c11 -Wall -Wextra -Werror $SAN using.c -o using \
        $(pkg-config --cflags --libs fheplan-static)) >"$rd/log" 2>&1; then
    cat "$rd/log"
    bad "README.md: the 'Using the library' program does not compile"
elif ! (cd "$rd" && ./using >using.out 2>&1 && diff -u using.expect using.out); then
    bad "README.md: the 'Using the library' program's output is not the one shown"
else
    say "ok   README.md 'Using the library' compiles, runs on emu:1 and prints what it shows"
fi

[ $fail -eq 0 ] || { say "consumers: $fail failed"; exit 1; }
say "consumers: documented build lines, CMake package and README program pass"
