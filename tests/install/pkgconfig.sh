#!/usr/bin/env bash
# pkgconfig.sh — `cmake --install BUILD --prefix P` writes a verdict.pc for P,
# and a C program (examples/embed.c) builds against the installed library
# with nothing but pkg-config's flags: linked to libverdict.so with
# `--cflags --libs`, and as a static program with `--static` (it then needs
# no libverdict.so, nor any other shared library).
set -u
BUILD=${1:?usage: pkgconfig.sh BUILD_DIR}
. tests/lib.sh
scratch
need cc pkg-config ldd

P="$T/p"
if cmake --install "$BUILD" --prefix "$P" >"$T/install.log" 2>&1; then ok; else
  bad "cmake --install failed"; cat "$T/install.log" >&2; summary; exit 1
fi
PC="$P/lib/pkgconfig/verdict.pc"
[ -f "$PC" ] && ok || { bad "no $PC"; summary; exit 1; }
has "$PC" "prefix=$P" "verdict.pc names the prefix installed to"
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
eq "$(pkg-config --variable=libdir verdict)" "$P/lib" "libdir"
eq "$(pkg-config --modversion verdict)" "$(sed -n 's/^project(verdict VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)" "version"

CFLAGS="-std=c11 -Wall -Wextra -Werror"
SAN=0
if grep -q 'VD_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  CFLAGS="$CFLAGS -fsanitize=address,undefined"
  SAN=1
fi
# Built from the scratch folder with a copy of the source, so nothing of the
# source tree (include/, build/) is in reach but through pkg-config.
cp examples/embed.c "$T/embed.c"
BUNDLE="$PWD/tests/engine/bundles/gate"

# shared
# shellcheck disable=SC2046,SC2086
if (cd "$T" && cc $CFLAGS -o embed-shared embed.c $(pkg-config --cflags --libs verdict)) 2>"$T/cc"; then ok; else
  bad "embed.c does not build with pkg-config --cflags --libs verdict"; sed 's/^/  | /' "$T/cc" >&2
fi
if [ -x "$T/embed-shared" ]; then
  ldd "$T/embed-shared" >"$T/ldd" 2>&1
  LD_LIBRARY_PATH="$P/lib" ldd "$T/embed-shared" >"$T/ldd2" 2>&1
  has "$T/ldd2" "libverdict.so.0 => $P/lib/libverdict.so.0" "the shared build uses the installed libverdict.so.0"
  if LD_LIBRARY_PATH="$P/lib" "$T/embed-shared" "$BUNDLE" gate >"$T/out" 2>"$T/err"; then ok; else
    bad "the shared build fails"; sed 's/^/  | /' "$T/err" >&2
  fi
  has "$T/out" "from C: allow (allowed, source rule, rule api-cn" "the shared build decides"
fi

# static: the whole program, libc too (-static), from --static's list alone.
# AddressSanitizer does not link statically.
if [ "$SAN" = 0 ]; then
  # shellcheck disable=SC2046,SC2086
  if (cd "$T" && cc $CFLAGS -static -o embed-static embed.c $(pkg-config --static --cflags --libs verdict)) 2>"$T/cc"; then ok; else
    bad "embed.c does not link statically with pkg-config --static --cflags --libs verdict"
    grep -v "statically linked applications requires at runtime" "$T/cc" | sed 's/^/  | /' >&2
  fi
  if [ -x "$T/embed-static" ]; then
    LD_LIBRARY_PATH="$P/lib" ldd "$T/embed-static" >"$T/ldd" 2>&1
    hasnt "$T/ldd" "libverdict" "the static build needs no libverdict.so"
    has "$T/ldd" "not a dynamic executable" "the static build is static"
    # and runs without the installed shared library in reach
    rm -f "$P"/lib/libverdict.so*
    if "$T/embed-static" "$BUNDLE" gate >"$T/out" 2>"$T/err"; then ok; else
      bad "the static build fails"; sed 's/^/  | /' "$T/err" >&2
    fi
    has "$T/out" "from JSON: block (not allowed, source rule, rule scanners" "the static build decides"
  fi
fi

summary
[ "$fail" = 0 ]
