#!/usr/bin/env bash
# Make TLS credentials for fabric-tls-creds with GnuTLS's certtool and
# psktool (docs/fabric.md, "Keys and certificates"):
#   tls-certs.sh ca DIR [NAME]            a CA: DIR/ca-cert.pem, ca-key.pem
#   tls-certs.sh member CA DIR NAME ADDR...
#       DIR for -object tls-creds-x509,dir=DIR: CA's ca-cert.pem, and a
#       key and certificate for NAME (O=pvrdma,CN=NAME) good for both ends
#       of a link (server-*.pem and client-*.pem are the same), naming
#       the addresses ADDR... (IP addresses or DNS names) peers connect to
#   tls-certs.sh psk DIR [USER]           DIR/keys.psk with a new key for
#                                         USER (qemu by default)
# Private keys are made here, never committed.
set -euo pipefail
umask 077

tmpl() { # FILE LINE... : a certtool template
    local f=$1
    shift
    printf '%s\n' "$@" > "$f"
}

case "${1:-}" in
ca)
    dir=$2 name=${3:-pvrdma fabric CA}
    mkdir -p "$dir"
    certtool --generate-privkey --key-type=ecdsa --outfile "$dir/ca-key.pem" 2> /dev/null
    tmpl "$dir/ca.info" "cn = $name" "ca" "cert_signing_key" "expiration_days = 3650"
    certtool --generate-self-signed --load-privkey "$dir/ca-key.pem" \
        --template "$dir/ca.info" --outfile "$dir/ca-cert.pem" 2> /dev/null
    rm -f "$dir/ca.info"
    ;;
member)
    ca=$2 dir=$3 name=$4
    shift 4
    mkdir -p "$dir"
    lines=("organization = pvrdma" "cn = $name" "tls_www_server" "tls_www_client"
           "signing_key" "encryption_key" "expiration_days = 3650")
    for a in "$@"; do
        if [[ $a =~ ^[0-9.]+$ || $a == *:* ]]; then
            lines+=("ip_address = $a")
        else
            lines+=("dns_name = $a")
        fi
    done
    tmpl "$dir/member.info" "${lines[@]}"
    certtool --generate-privkey --key-type=ecdsa --outfile "$dir/server-key.pem" 2> /dev/null
    certtool --generate-certificate --load-privkey "$dir/server-key.pem" \
        --load-ca-certificate "$ca/ca-cert.pem" --load-ca-privkey "$ca/ca-key.pem" \
        --template "$dir/member.info" --outfile "$dir/server-cert.pem" 2> /dev/null
    rm -f "$dir/member.info"
    cp "$dir/server-key.pem" "$dir/client-key.pem"
    cp "$dir/server-cert.pem" "$dir/client-cert.pem"
    cp "$ca/ca-cert.pem" "$dir/ca-cert.pem"
    ;;
psk)
    dir=$2 user=${3:-qemu}
    mkdir -p "$dir"
    psktool -u "$user" -p "$dir/keys.psk" > /dev/null
    ;;
*)
    sed -n '2,14s/^# \{0,1\}//p' "$0" >&2
    exit 2
    ;;
esac
