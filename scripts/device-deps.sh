#!/usr/bin/env bash
# Carries kvtier's build dependencies to a machine that has no package
# registry (the GPU machine lent through the `device` tool: CUDA's image,
# nothing outside reachable).
#
#   scripts/device-deps.sh pack   [BUNDLE]   on Debian 12 after scripts/install-deps
#   scripts/device-deps.sh unpack [BUNDLE]   on the machine without registries
#
# BUNDLE defaults to .devdeps/deps.tar.xz (ignored by git; name it in the
# device tool's `carry`). `pack` tars the installed files of the -dev
# packages that the build's find_package/pkg_check_modules calls need, with
# their shared libraries, from this machine's dpkg database (no download):
# the closure of Depends, minus the compiler, libc, Boost and other base
# packages the target already has, minus static archives other than
# GoogleTest's and benchmark's (which ship no shared library). `unpack`
# copies the files to / without overwriting any file already there, so the
# target's own libc, libstdc++ and libraries keep precedence.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
bundle="${2:-.devdeps/deps.tar.xz}"

# The packages whose headers, CMake configs or pkg-config files the build
# reads (cmake/Dependencies.cmake and cmake/Backends.cmake); UCX is left out,
# so the peer transport builds as its fake there.
ROOTS=(
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libxxhash-dev liburing-dev librocksdb-dev libcli11-dev libyaml-cpp-dev libspdlog-dev
  libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev prometheus-cpp-dev
  libmicrohttpd-dev libssl-dev libcurl4-openssl-dev libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
  pkg-config
)
# Packages of the base system, the compiler and the C/C++ runtimes: the target
# has its own (a newer glibc and libstdc++ than Debian 12's), and Boost and
# UCX are not needed.
BASE='^(libc6|libc6-dev|libc-dev-bin|libstdc\+\+|libgcc|gcc|g\+\+|cpp(-[0-9]+)?$|libasan|libtsan|liblsan|'\
'libubsan|libitm|libatomic|libquadmath|libgomp|libhwasan|libcc1|linux-libc-dev|dpkg|tar|passwd|'\
'perl|python|libperl|libboost|libpython|debconf|cdebconf|base-|coreutils|bash|libcrypt|rpcsvc|'\
'binutils|login|adduser|mawk|libsemanage|libselinux|libaudit|libpam|libsepol|libdb5|libbz2-1|'\
'zlib1g$|libzstd1|liblzma|libtinfo|libncurses|readline|libreadline|libslang|libnewt|sensible|'\
'lsb-base|libacl|libattr|libcap-ng|libpcre|libsystemd|libudev|libgpg|libgcrypt|catch2|'\
'googletest$|libucx|ibverbs|librdmacm|libibverbs|libnl|icu-devtools|install-info|'\
'libdebian-installer|libtextwrap|libmd0|libbsd0|libgmp10|libp11-kit0|libgmpxx)'

pack() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "${ROOTS[@]}" | grep -v '^[ <]' | sort -u |
    grep -vE "$BASE" > "$tmp/packages"
  local p
  while read -r p; do
    dpkg-query -W "$p" >/dev/null 2>&1 || { echo "device-deps: $p is not installed" >&2; exit 1; }
    dpkg -L "$p"
  done < "$tmp/packages" | sort -u > "$tmp/listed"
  # Static archives that a CMake config names (gflags' exports its static
  # target beside the shared one, and CMake checks that both files exist).
  grep '/cmake/.*\.cmake$' "$tmp/listed" | xargs -r cat 2>/dev/null |
    grep -o '[A-Za-z0-9_.+-]*\.a\b' | sort -u > "$tmp/referenced" || true
  # Regular files and links only; no docs; static archives only where no
  # shared library exists or a CMake config names them.
  local f
  while read -r f; do
    # Directories (and links to them, like a merged-/usr /lib) come with
    # their files.
    [[ -z "$f" || -d "$f" || ! -e "$f" && ! -L "$f" ]] && continue
    case "$f" in
      /usr/share/doc/* | /usr/share/man/* | /usr/share/locale/* | /usr/share/info/* | \
        /usr/share/lintian/* | /usr/share/bug/* | /etc/*) continue ;;
      *gtest*.a | *gmock*.a | *benchmark*.a) ;;
      *.a) grep -qxF "$(basename "$f")" "$tmp/referenced" || continue ;;
    esac
    printf '%s\n' "$f"
  done < "$tmp/listed" > "$tmp/files"
  mkdir -p "$(dirname "$bundle")"
  tar -cf - -T "$tmp/files" 2>/dev/null | xz -9 -T2 > "$bundle"
  echo "device-deps: $(wc -l < "$tmp/packages") packages, $(wc -l < "$tmp/files") files ->" \
    "$bundle ($(du -h "$bundle" | cut -f1))"
}

unpack() {
  [[ -f "$bundle" ]] || { echo "device-deps: no bundle at $bundle" >&2; exit 1; }
  local tmp
  tmp=$(mktemp -d)
  local root="${DEVICE_DEPS_ROOT:-/}"
  tar -xJf "$bundle" -C "$tmp"
  # Where /lib, /bin or /sbin link into /usr (merged /usr), move the bundle's
  # files there first: cp cannot put a directory over the link.
  local d
  for d in lib bin sbin; do
    if [[ -L "$root/$d" && -d "$tmp/$d" ]]; then
      mkdir -p "$tmp/usr/$d"
      cp -a --update=none "$tmp/$d/." "$tmp/usr/$d/" 2>/dev/null || cp -an "$tmp/$d/." "$tmp/usr/$d/"
      rm -rf "${tmp:?}/$d"
    fi
  done
  # No clobbering: what the machine has already wins.
  cp -a --update=none "$tmp"/. "$root"/ 2>/dev/null || cp -an "$tmp"/. "$root"/
  rm -rf "$tmp"
  [[ "$root" == / ]] && { ldconfig 2>/dev/null || true; }
  echo "device-deps: unpacked $bundle into $root (existing files kept)"
}

case "$mode" in
  pack) pack ;;
  unpack) unpack ;;
  *) echo "usage: $0 pack|unpack [BUNDLE]" >&2; exit 2 ;;
esac
