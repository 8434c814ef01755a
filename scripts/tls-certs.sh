#!/usr/bin/env bash
# Makes the certificates of a secure three-member set-up (README "TLS", docker-compose.tls.yml):
#   <dir>/ca.pem, ca-key.pem          a CA (P-256, 365 days)
#   <dir>/n1.pem, n1-key.pem, ...     one certificate per member, for both ports and both directions
#                                     (server and client use; SANs: the member's name, localhost, 127.0.0.1)
#   <dir>/client.pem, client-key.pem  a client certificate, CN=root (the user name with auth and --client-cert-auth)
# usage: scripts/tls-certs.sh [dir]   (default ./tls; existing files are kept)
set -euo pipefail
dir="${1:-tls}"
mkdir -p "$dir"
cd "$dir"
if [ ! -f ca.pem ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca-key.pem -out ca.pem \
    -subj "/CN=etcetera-ca" -days 365 2>/dev/null
fi
leaf() { # name cn sans
  local name="$1" cn="$2" sans="$3"
  [ -f "$name.pem" ] && return 0
  printf 'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=critical,CA:FALSE\nsubjectAltName=%s\n' "$sans" > "$name.ext"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$name-key.pem" -out "$name.csr" -subj "/CN=$cn" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca-key.pem -set_serial "0x$(openssl rand -hex 8)" -days 365 \
    -extfile "$name.ext" -out "$name.pem" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
for n in n1 n2 n3; do leaf "$n" "$n" "DNS:$n,DNS:localhost,IP:127.0.0.1"; done
leaf client root "DNS:localhost,IP:127.0.0.1"
chmod 600 ./*-key.pem
# The container runs as root; the keys are readable by the owner only, which is enough for docker-compose.tls.yml.
echo "certificates in $(pwd): ca.pem, n1.pem n2.pem n3.pem (keys *-key.pem), client.pem (CN=root)"
