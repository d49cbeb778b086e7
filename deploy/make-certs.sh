#!/usr/bin/env bash
# make-certs.sh DIR [CLIENT_NAME...]: a private CA, a server certificate for
# localhost / 127.0.0.1 (also the daemons' client certificate to each other)
# and one client certificate per CLIENT_NAME (its common name is the identity
# kvtierd matches in the identities file). Keys are mode 600. For tests and
# for a first deployment; use your organisation's CA in production.
set -euo pipefail
dir=${1:?usage: make-certs.sh DIR [CLIENT_NAME...]}
shift
mkdir -p "$dir"
cd "$dir"
umask 077
days=825
ossl() { openssl "$@" 2>/dev/null; }

ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem \
  -days "$days" -subj "/CN=kvtier test CA"

sign() {  # sign NAME CN EXT
  ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -out "$1.csr" \
    -subj "/CN=$2"
  printf '%s\n' "$3" > "$1.ext"
  ossl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" \
    -days "$days" -extfile "$1.ext"
  rm -f "$1.csr" "$1.ext"
}

sign server localhost "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
for name in "$@"; do
  sign "$name" "$name" "extendedKeyUsage=clientAuth"
done
chmod 644 ./*.pem
echo "make-certs: CA, server and ${#} client certificate(s) in $dir"
