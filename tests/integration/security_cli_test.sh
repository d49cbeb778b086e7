#!/usr/bin/env bash
# The kvtier CLI against a kvtierd with TLS, mutual TLS and token identities:
# the TLS and token flags, and the refusals a wrong or missing credential
# gets (exit 1 with UNAUTHENTICATED or PERMISSION_DENIED).
# Usage: security_cli_test.sh KVTIERD KVTIER
set -euo pipefail
KVTIERD=$1 KVTIER=$2
# shellcheck source=cli_test_lib.sh
source "$(dirname "$0")/cli_test_lib.sh"
DEPLOY="$(dirname "$0")/../../deploy"

step "certificates, tokens, identities"
bash "$DEPLOY/make-certs.sh" "$WORK/pki" ops engine-a >/dev/null
printf 'tenant-token-0123456789\n' >"$WORK/tenant.token"
printf 'admin-token-0123456789\n' >"$WORK/admin.token"
cat >"$WORK/identities.yaml" <<YAML
identities:
  - {name: engine-a, token_sha256: $(printf 'tenant-token-0123456789' | sha256sum | cut -d' ' -f1), tenant: alpha}
  - {name: ops, token: admin-token-0123456789, role: admin}
  - {subject: ops, role: admin}
YAML
chmod 600 "$WORK/identities.yaml"

step "kvtierd with mutual TLS and identities"
start_kvtierd "$WORK/d" --listen 127.0.0.1:0 --host-tier-bytes 64MiB \
  --set host_tier.slab_bytes=1MiB --set limits.max_block_bytes=1MiB --set nvme.dirs= \
  --set metrics.listen=off --set costmodel.probe_tiers=false --set peer.transport=off \
  --set "security.tls_cert=$WORK/pki/server.pem" --set "security.tls_key=$WORK/pki/server.key" \
  --set "security.tls_client_ca=$WORK/pki/ca.pem" \
  --set "security.identities_file=$WORK/identities.yaml"
grep -q "security: mutual TLS, authentication on (3 identities)" "$WORK/d.err" || fail "security line"
TLS=(--tls-ca "$WORK/pki/ca.pem" --tls-server-name localhost)

expect_refusal() {  # expect_refusal CODE ARGS...
  local code=$1 rc=0; shift
  "$KVTIER" --addr "$ADDR" --timeout 5 "$@" >/dev/null 2>"$WORK/err" || rc=$?
  [[ $rc -eq 1 ]] || fail "kvtier $* exited $rc, expected 1: $(tail -c 3000 "$WORK/err")"
  grep -q "$code" "$WORK/err" || fail "kvtier $*: expected $code, got: $(cat "$WORK/err")"
}

step "refusals"
expect_refusal UNAVAILABLE status                                   # plaintext to a TLS port
expect_refusal UNAUTHENTICATED "${TLS[@]}" status                   # no credential
KVTIER_TOKEN=wrong-token-0123456789 expect_refusal UNAUTHENTICATED "${TLS[@]}" status
expect_refusal PERMISSION_DENIED "${TLS[@]}" --token-file "$WORK/tenant.token" status
expect_refusal PERMISSION_DENIED "${TLS[@]}" --tls-cert "$WORK/pki/engine-a.pem" \
  --tls-key "$WORK/pki/engine-a.key" --token-file "$WORK/tenant.token" wear
rc=0; "$KVTIER" --addr "$ADDR" --tls-ca "$WORK/missing.pem" status 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "a missing CA file should be a usage error, got $rc"

step "admin by token and by certificate; a tenant stores and reads its blocks"
"$KVTIER" --addr "$ADDR" "${TLS[@]}" --token-file "$WORK/admin.token" status | grep -q "^kvtierd" ||
  fail "admin token status"
"$KVTIER" --addr "$ADDR" "${TLS[@]}" --tls-cert "$WORK/pki/ops.pem" --tls-key "$WORK/pki/ops.key" \
  tiers | grep -q "^host " || fail "admin certificate tiers"
head -c 700000 /dev/urandom >"$WORK/in.bin"
KVTIER_TOKEN_FILE="$WORK/tenant.token" "$KVTIER" --addr "$ADDR" "${TLS[@]}" put "$WORK/in.bin" \
  >"$WORK/keys.txt" 2>/dev/null
# shellcheck disable=SC2046
KVTIER_TOKEN_FILE="$WORK/tenant.token" "$KVTIER" --addr "$ADDR" "${TLS[@]}" get \
  $(cat "$WORK/keys.txt") -o "$WORK/out.bin" 2>/dev/null
cmp "$WORK/in.bin" "$WORK/out.bin" || fail "tenant round trip"
"$KVTIER" --addr "$ADDR" "${TLS[@]}" --token-file "$WORK/admin.token" namespaces |
  grep -q "tenant=alpha" || fail "namespaces does not show the tenant"
"$KVTIER" --addr "$ADDR" "${TLS[@]}" health | grep -q SERVING || fail "health needs no credentials"
echo "PASS"
