#!/usr/bin/env bash
# Item 9 (configuration gaps): the real kvtierd refuses each configuration
# below at start, with the exit status and a message naming the key and the
# reason (docs/operations.md, "What the daemon refuses at start"):
#   a. nvme.dirs naming one directory twice (a symlink to it)        exit 2
#   b. --listen 127.0.0.1:99999, and a malformed host:port           exit 2
#   c. --config DIRECTORY                                             exit 2
#   d. --config /dev/zero (and a config over 1 MiB)                   exit 2
#   e. a host tier larger than physical memory                        exit 2
#   f. a YAML key given twice                                         exit 2
#   g. a restart with the NVMe filesystem full: no RocksDB abort      exit 1
#   h. a failed preallocation removes its partial slot file           exit 1
#   i. a garbage TLS certificate (and a key of another certificate)   exit 1
#   j. a nonexistent or non-tmpfs server.shm_dir                      exit 2
# g and h mount small tmpfs filesystems: as root only (CI runs as root);
# elsewhere they are skipped with the reason printed.
# Usage: config_cases_test.sh KVTIERD KVTIER
set -euo pipefail
KVTIERD=$1
KVTIER=$2
HERE=$(dirname "$0")
# shellcheck source=../integration/cli_test_lib.sh
source "$HERE/../integration/cli_test_lib.sh"

MOUNTS=()
unmount_all() {
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill -9 "$p" 2>/dev/null || true; done
  for m in "${MOUNTS[@]:-}"; do [[ -n "$m" ]] && umount -l "$m" 2>/dev/null || true; done
  cleanup
}
trap unmount_all EXIT

# Small and quiet: no NVMe tier unless a case asks, ephemeral ports.
# (b names --listen itself: the flag may be given once.)
NOLISTEN=(--host-tier-bytes 64MiB --set host_tier.slab_bytes=2MiB
      --set limits.max_block_bytes=1MiB --set nvme.dirs= --set metrics.listen=127.0.0.1:0
      --set costmodel.probe_tiers=false --set peer.transport=off --set gpu.tier=off)
BASE=(--listen 127.0.0.1:0 "${NOLISTEN[@]}")

# refuse NAME STATUS MESSAGE ARGS...: kvtierd ARGS must exit STATUS (and not
# keep running: 20 s at most) with MESSAGE, a fixed string, on stderr.
refuse() {
  local name=$1 want=$2 msg=$3 rc=0
  shift 3
  timeout 20 "$KVTIERD" "$@" </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
  [[ $rc -eq $want ]] || fail "$name: expected exit $want, got $rc: $(tail -3 "$WORK/$name.err")"
  grep -qF -- "$msg" "$WORK/$name.err" ||
    fail "$name: the message lacks \"$msg\": $(tail -3 "$WORK/$name.err")"
  echo "ok: $name: $(grep -F -- "$msg" "$WORK/$name.err" | head -1)"
}

# mount_tmpfs DIR SIZE: a small filesystem of its own; false if it cannot.
mount_tmpfs() {
  mkdir -p "$1"
  [[ $(id -u) -eq 0 ]] || return 1
  mount -t tmpfs -o "size=$2" tmpfs "$1" 2>/dev/null || return 1
  MOUNTS+=("$1")
}

free_bytes() { echo $(($(stat -f -c '%a * %S' "$1"))); }

step "a. nvme.dirs naming one directory twice (once through a symlink)"
mkdir -p "$WORK/nvme-a"
ln -s "$WORK/nvme-a" "$WORK/nvme-a-link"
refuse a 2 "nvme.dirs names one directory twice: '$WORK/nvme-a' and '$WORK/nvme-a-link'" \
  "${BASE[@]}" --set "nvme.dirs=$WORK/nvme-a,$WORK/nvme-a-link" --set nvme.bytes_per_dir=8MiB \
  --set nvme.slab_bytes=2MiB
[[ ! -e "$WORK/nvme-a/kvtier-slots.dat" ]] || fail "a: a slot file was created"

step "b. listen ports outside 0..65535, malformed host:port"
refuse b-port 2 "server.listen '127.0.0.1:99999': the port 99999 is outside 0..65535" \
  "${NOLISTEN[@]}" --listen 127.0.0.1:99999
refuse b-noport 2 "server.listen '127.0.0.1': not host:port" "${NOLISTEN[@]}" --listen 127.0.0.1
refuse b-metrics 2 "metrics.listen '127.0.0.1:70000': the port 70000 is outside 0..65535" \
  "${BASE[@]}" --set metrics.listen=127.0.0.1:70000

step "c. --config naming a directory"
refuse c 2 "--config '$WORK': not a regular file (a directory)" "${BASE[@]}" --config "$WORK"

step "d. --config /dev/zero, and a config file over 1 MiB"
refuse d-zero 2 "--config '/dev/zero': not a regular file (a character device)" \
  "${BASE[@]}" --config /dev/zero
{ printf 'log:\n  level: info\n'; head -c 1100000 /dev/zero | tr '\0' '#'; echo; } >"$WORK/big.yaml"
refuse d-big 2 "over the 1048576-byte limit" "${BASE[@]}" --config "$WORK/big.yaml"

step "e. a host tier larger than physical memory"
phys=$(($(getconf _PHYS_PAGES) * $(getconf PAGESIZE)))
want_mib=$((phys / 1048576 + 4096))  # 4 GiB more than the machine has
refuse e 2 "host_tier.bytes ($((want_mib * 1048576)) bytes" "${BASE[@]}" \
  --set "host_tier.bytes=${want_mib}MiB"  # after BASE's --host-tier-bytes: it wins
grep -qF "exceeds this machine's physical memory ($phys bytes" "$WORK/e.err" ||
  fail "e: the message lacks the physical memory figure: $(cat "$WORK/e.err")"

step "f. a YAML key given twice"
printf 'server:\n  listen: 127.0.0.1:0\n  listen: 127.0.0.1:1\n' >"$WORK/dup.yaml"
refuse f 2 "config line 3: duplicate key 'server.listen' (lines 2 and 3)" \
  "${BASE[@]}" --config "$WORK/dup.yaml"

step "i. TLS: a garbage certificate; a key of another certificate"
printf 'this is not a certificate\n' >"$WORK/garbage.pem"
printf 'nor is this a key\n' >"$WORK/garbage.key"
refuse i-garbage 1 "security.tls_cert: '$WORK/garbage.pem' is not a PEM certificate" \
  "${BASE[@]}" --set "security.tls_cert=$WORK/garbage.pem" --set "security.tls_key=$WORK/garbage.key"
if command -v openssl >/dev/null; then
  bash "$HERE/../../deploy/make-certs.sh" "$WORK/pki" other >/dev/null
  refuse i-mismatch 1 "security.tls_key: '$WORK/pki/other.key' does not match the certificate" \
    "${BASE[@]}" --set "security.tls_cert=$WORK/pki/server.pem" \
    --set "security.tls_key=$WORK/pki/other.key"
  refuse i-garbage-key 1 "security.tls_key: '$WORK/garbage.key' is not a PEM private key" \
    "${BASE[@]}" --set "security.tls_cert=$WORK/pki/server.pem" \
    --set "security.tls_key=$WORK/garbage.key"
  refuse i-garbage-ca 1 "security.tls_client_ca: '$WORK/garbage.pem' holds no PEM certificate" \
    "${BASE[@]}" --set "security.tls_cert=$WORK/pki/server.pem" \
    --set "security.tls_key=$WORK/pki/server.key" --set "security.tls_client_ca=$WORK/garbage.pem"
  # The matching pair (and a real CA) still starts.
  start_kvtierd "$WORK/i-good" "${BASE[@]}" --set "security.tls_cert=$WORK/pki/server.pem" \
    --set "security.tls_key=$WORK/pki/server.key" --set "security.tls_client_ca=$WORK/pki/ca.pem"
  kill -TERM "$DAEMON_PID"
  wait "$DAEMON_PID" || fail "i: the daemon with a good certificate did not stop cleanly"
  echo "ok: i-good: a matching certificate and key start"
else
  echo "SKIP: i (mismatched key): no openssl command to make certificates"
fi

step "j. server.shm_dir missing, or not on tmpfs"
refuse j-missing 2 "server.shm_dir '$WORK/no-shm': No such file or directory" \
  "${BASE[@]}" --set "server.shm_dir=$WORK/no-shm"
mkdir -p "$WORK/disk-shm"
if [[ $(stat -f -c %T "$WORK/disk-shm") != tmpfs ]]; then
  refuse j-disk 2 "server.shm_dir '$WORK/disk-shm' is not on tmpfs or hugetlbfs" \
    "${BASE[@]}" --set "server.shm_dir=$WORK/disk-shm"
else
  echo "SKIP: j (non-tmpfs shm_dir): $WORK is on tmpfs itself"
fi

step "h. a failed preallocation leaves no partial slot file"
if mount_tmpfs "$WORK/small" 8m; then
  head -c $((3 * 1048576)) /dev/zero >"$WORK/small/filler"  # 5 MiB left for a 6 MiB file
  before=$(free_bytes "$WORK/small")
  refuse h 1 "nvme.dirs: cannot preallocate 6291456 bytes (nvme.bytes_per_dir)" \
    "${BASE[@]}" --set "nvme.dirs=$WORK/small/nvme" --set nvme.bytes_per_dir=6MiB \
    --set nvme.slab_bytes=2MiB
  [[ ! -e "$WORK/small/nvme/kvtier-slots.dat" ]] ||
    fail "h: the partial slot file is left behind ($(stat -c %s "$WORK/small/nvme/kvtier-slots.dat") bytes)"
  after=$(free_bytes "$WORK/small")
  [[ $after -ge $before ]] || fail "h: the failed start kept disk space ($before -> $after bytes free)"
else
  echo "SKIP: h: cannot mount a small tmpfs (needs root and mount permission; uid $(id -u))"
fi

step "g. restart with the NVMe filesystem full: a clear exit 1, no abort"
if mount_tmpfs "$WORK/full" 16m; then
  NVME=("${BASE[@]}" --set "nvme.dirs=$WORK/full/nvme" --set nvme.bytes_per_dir=4MiB
        --set nvme.slab_bytes=2MiB --set nvme.write_policy=write_through
        --set nvme.admit_min_uses=0 --set nvme.mover_interval_ms=20)
  start_kvtierd "$WORK/g1" "${NVME[@]}"
  head -c 300000 /dev/urandom >"$WORK/g.bin"
  "$KVTIER" --addr "$ADDR" put --block-bytes 64KiB "$WORK/g.bin" >"$WORK/g.keys"
  sleep 1  # the mover writes them through
  kill -TERM "$DAEMON_PID"
  rc=0; wait "$DAEMON_PID" || rc=$?
  [[ $rc -eq 0 ]] || fail "g: the first daemon exited $rc: $(tail -3 "$WORK/g1.err")"
  # Fill the filesystem to the last byte.
  dd if=/dev/zero of="$WORK/full/filler" bs=64k 2>/dev/null || true
  dd if=/dev/zero of="$WORK/full/filler2" bs=4k 2>/dev/null || true
  refuse g 1 "bytes free on its filesystem; opening it needs at least" "${NVME[@]}"
  grep -qF "cannot start:" "$WORK/g.err" || fail "g: no 'cannot start' line: $(tail -3 "$WORK/g.err")"
  grep -qF "nvme.dirs" "$WORK/g.err" || fail "g: the message does not name nvme.dirs: $(tail -3 "$WORK/g.err")"
  [[ -s "$WORK/full/nvme/kvtier-slots.dat" ]] || fail "g: the failed restart removed the slot file"
  # Room again: the same directory starts and still has its blocks.
  rm -f "$WORK/full/filler" "$WORK/full/filler2"
  start_kvtierd "$WORK/g3" "${NVME[@]}"
  grep -qE "nvme tier: .* [1-9][0-9]* blocks recovered" "$WORK/g3.err" ||
    fail "g: blocks were not recovered after the disk had room: $(grep 'nvme tier' "$WORK/g3.err")"
  kill -TERM "$DAEMON_PID"
  wait "$DAEMON_PID" || true
else
  echo "SKIP: g: cannot mount a small tmpfs (needs root and mount permission; uid $(id -u))"
fi

echo "PASS: config_cases_test"
