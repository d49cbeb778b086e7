#!/bin/sh
# runtime-packages.sh BINARY...: the Debian packages that own the shared
# libraries the binaries link, one per line. Used by the Dockerfile's build
# stage so that the runtime image installs exactly those. Fails naming a
# library that is missing or that no package owns. (On Debian 12, /lib is
# /usr/lib, but dpkg records some packages' files under one and some under
# the other: both are tried.)
set -eu
deps=$(ldd "$@")
if echo "$deps" | grep -q "not found"; then
  echo "runtime-packages: missing libraries:" >&2
  echo "$deps" | grep "not found" >&2
  exit 1
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for lib in $(echo "$deps" | awk '/=> \// {print $3}' | sort -u); do
  real=$(readlink -f "$lib")
  pkg=""
  for path in "$lib" "$real" "${real#/usr}" "/usr$real"; do
    pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1) || true
    [ -n "$pkg" ] && break
  done
  [ -n "$pkg" ] || { echo "runtime-packages: no package owns $lib" >&2; exit 1; }
  echo "$pkg" >>"$out"
done
sort -u "$out"
