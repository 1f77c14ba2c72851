#!/usr/bin/env bash
# deb.sh — the Debian package (scripts/make-deb, `make deb`), built into the
# scratch folder and looked at without installing it: its control fields
# (the version, the dependencies: the Debian packages of the libraries it
# links), its files (command, libraries with their SONAME links, header,
# verdict.pc, manual pages, completion, unit, settings, example policies),
# the conffiles, lintian (no error), the unit (systemd-analyze verify, and
# its sandbox rated "OK" by systemd-analyze security), and the unpacked
# command: --version, check on the shipped policies, serve on the shipped
# settings file, and a program built with the shipped verdict.pc.
set -u
BUILD=${1:?usage: deb.sh BUILD_DIR}
V="$BUILD/verdict"
. tests/lib.sh
scratch
need dpkg-deb dpkg-shlibdeps objdump lintian systemd-analyze man curl python3 pkg-config cc

version=$("$V" --version | sed 's/^verdict //')
arch=$(dpkg --print-architecture)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
DEB="$T/verdict_${version}_$arch.deb"
# gzip rather than xz: quicker, and the same package inside
if DEB_COMPRESSION=gzip sh scripts/make-deb "$BUILD" "$DEB" >"$T/make.log" 2>&1; then ok; else
  bad "make-deb failed"; sed 's/^/  | /' "$T/make.log" >&2; summary; exit 1
fi

# ---- control ----
dpkg-deb -f "$DEB" >"$T/control"
field() { dpkg-deb -f "$DEB" "$1"; }
eq "$(field Package)" verdict "Package"
eq "$(field Version)" "$version" "Version: the command's"
eq "$(field Architecture)" "$arch" "Architecture"
depends=$(field Depends)
# every library libverdict.so and the command load comes from a package named in Depends
dpkg-deb -x "$DEB" "$T/x"
for so in "$T/x/usr/lib/$ma/libverdict.so.$version" "$T/x/usr/bin/verdict"; do
  for lib in $(objdump -p "$so" | awk '$1 == "NEEDED" { print $2 }'); do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
    [ -n "$path" ] || { bad "$lib: not found by ldconfig"; continue; }
    pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | sed -n '1s/:.*//p')
    [ -z "$pkg" ] && pkg=$(dpkg -S "$path" 2>/dev/null | sed -n '1s/:.*//p')
    case ", $depends," in
      *", $pkg "* | *", $pkg,"*) ok ;;
      *) bad "$(basename "$so") needs $lib (package $pkg), not in Depends: $depends" ;;
    esac
  done
done
field Suggests | grep -q libuv1-dev && ok || bad "Suggests names the -dev packages of the static link"
field Suggests | grep -q python3-xgboost && ok || bad "Suggests names python3-xgboost (verdict model train)"

# ---- files ----
dpkg-deb -c "$DEB" >"$T/list"
awk '{ print $6 }' "$T/list" | sed 's|^\./||; s|/$||' | sort >"$T/files"
want="usr/bin/verdict usr/lib/$ma/libverdict.so usr/lib/$ma/libverdict.so.0 usr/lib/$ma/libverdict.so.$version
  usr/lib/$ma/libverdict.a usr/include/verdict.h usr/lib/$ma/pkgconfig/verdict.pc
  usr/share/bash-completion/completions/verdict lib/systemd/system/verdict.service
  etc/verdict/verdict.conf etc/verdict/policies/request_gate.yaml
  usr/share/verdict/examples/policies/request_gate.yaml usr/share/verdict/examples/embed.c
  usr/share/doc/verdict/copyright usr/share/doc/verdict/changelog.gz usr/share/doc/verdict/deploy.md
  usr/share/man/man1/verdict.1.gz usr/share/verdict/verdict-train-model"
for c in $("$V" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }'); do
  want="$want usr/share/man/man1/verdict-$c.1.gz"
done
for f in $want; do grep -qx "$f" "$T/files" && ok || bad "the package lacks /$f"; done
grep -q '\.verdict' "$T/files" && bad "the package holds a .verdict folder (a version store or snapshots)" || ok
awk '$2 != "root/root" { print }' "$T/list" | grep -q . && bad "files not owned by root" || ok
has "$T/list" "usr/lib/$ma/libverdict.so.0 -> libverdict.so.$version" "the SONAME link"
eq "$(objdump -p "$T/x/usr/lib/$ma/libverdict.so.$version" | awk '$1 == "SONAME" { print $2 }')" libverdict.so.0 "SONAME"
objdump -h "$T/x/usr/bin/verdict" | grep -q debug_info && bad "the command is not stripped" || ok

# conffiles: every file under /etc, and only those
dpkg-deb --ctrl-tarfile "$DEB" | tar -xO ./conffiles | sort >"$T/conffiles"
grep '^etc/' "$T/files" | while read -r f; do [ -d "$T/x/$f" ] || echo "/$f"; done | sort >"$T/etc"
cmp -s "$T/conffiles" "$T/etc" && ok || { bad "conffiles are not the files under /etc"; diff "$T/etc" "$T/conffiles" >&2; }
for s in postinst prerm postrm; do
  dpkg-deb --ctrl-tarfile "$DEB" | tar -xO "./$s" >"$T/$s" && sh -n "$T/$s" && ok || bad "$s"
done

# ---- lintian: no errors (warnings listed) ----
# Not on a sanitizer build's package, which nobody ships: lintian takes
# minutes over its binaries and judges nothing the plain build's does not.
SAN=0
grep -q 'VD_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && SAN=1
if [ "$SAN" = 0 ]; then
  lintian --no-cfg "$DEB" >"$T/lintian" 2>&1
  grep -E '^[EW]: ' "$T/lintian" | sed 's/^/  lintian: /' >&2
  grep -q '^E: ' "$T/lintian" && bad "lintian reports errors" || ok
fi

# ---- the unit ----
UNIT="$T/x/lib/systemd/system/verdict.service"
for d in 'DynamicUser=yes' 'ProtectSystem=strict' 'StateDirectory=verdict' 'NoNewPrivileges=yes' \
  'ProtectHome=yes' 'PrivateTmp=yes' 'CapabilityBoundingSet=' 'RestrictAddressFamilies=' 'Restart=on-failure' \
  'ExecReload=/bin/kill -HUP $MAINPID' 'ExecStart=/usr/bin/verdict serve --config /etc/verdict/verdict.conf'; do
  grep -q "^$d" "$UNIT" && ok || bad "the unit lacks $d"
done
# verified with the unpacked command in place of /usr/bin/verdict (not installed here)
sed "s|/usr/bin/verdict|$T/x/usr/bin/verdict|" "$UNIT" >"$T/verdict.service"
if MANPATH="$T/x/usr/share/man" systemd-analyze verify "$T/verdict.service" >"$T/verify" 2>&1; then ok; else
  bad "systemd-analyze verify refuses the unit"; sed 's/^/  | /' "$T/verify" >&2
fi
if systemd-analyze security --offline=yes --threshold=20 "$T/verdict.service" >"$T/security" 2>&1; then ok; else
  bad "systemd-analyze security: exposure above 2.0"; grep -E 'Overall|✗' "$T/security" >&2
fi

# ---- the manual pages and the completion, as shipped ----
for p in "$T"/x/usr/share/man/man1/*.1.gz; do
  MANWIDTH=80 man --warnings -l "$p" >/dev/null 2>"$T/warn" && [ ! -s "$T/warn" ] && ok ||
    { bad "man -l $(basename "$p")"; cat "$T/warn" >&2; }
done
bash -n "$T/x/usr/share/bash-completion/completions/verdict" && ok || bad "the completion"

# ---- the unpacked command ----
X="$T/x/usr/bin/verdict"
eq "$("$X" --version)" "verdict $version" "the unpacked command runs"
"$X" check "$T/x/etc/verdict/policies" >"$T/check" 2>&1 && ok || { bad "check on /etc/verdict/policies"; cat "$T/check" >&2; }
"$X" check "$T/x/usr/share/verdict/examples/policies" >"$T/check" 2>&1 && ok || bad "check on the examples"
# serve on the shipped settings file, with the paths outside the package's
# folders overridden on the command line
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$X" serve --config "$T/x/etc/verdict/verdict.conf" --policy "$T/x/etc/verdict/policies" \
  --listen "127.0.0.1:$PORT" --snapshots "$T/var/snapshots" --store "$T/var/versions" \
  --state-file "$T/var/counters" 2>"$T/serve.log" &
PID=$!
wait_ready deb "$T/serve.log"
REQ='{"action":"http_request","context":{"method":"GET","path":"/.env","client_ip":"45.155.205.233","headers":{"user-agent":"curl/8.5.0"},"env":{"country":"NL"}}}'
curl -s "$URL/v1/decide" -d "$REQ" >"$T/decision"
has "$T/decision" '"action":"block"' "the unpacked server decides with the shipped policies"
stop
[ -f "$T/var/counters" ] && ok || bad "the shipped state-file setting applies (counters written at stop)"

# a program built with the shipped verdict.pc (its prefix moved by the sysroot)
cp examples/embed.c "$T/embed.c"
CF=""
[ "$SAN" = 1 ] && CF="-fsanitize=address,undefined"
# shellcheck disable=SC2046,SC2086
if (cd "$T" && cc $CF -o embed embed.c $(PKG_CONFIG_SYSROOT_DIR="$T/x" PKG_CONFIG_LIBDIR="$T/x/usr/lib/$ma/pkgconfig" \
  pkg-config --cflags --libs verdict)) 2>"$T/cc"; then ok; else bad "embed.c against the shipped verdict.pc"; cat "$T/cc" >&2; fi
if [ -x "$T/embed" ]; then
  LD_LIBRARY_PATH="$T/x/usr/lib/$ma" "$T/embed" tests/engine/bundles/gate gate >"$T/out" 2>&1
  has "$T/out" "from C: allow" "embed.c runs on the shipped libverdict.so"
fi

summary
[ "$fail" = 0 ]
