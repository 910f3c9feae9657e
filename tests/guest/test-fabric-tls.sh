#!/usr/bin/env bash
# TLS on the fabric's TCP links (fabric-tls-creds, fabric-tls-authz;
# docs/fabric.md, "Security"), between pairs of QEMUs without guests (the
# fabric links as soon as the devices are made; test-xhost.sh and
# test-xvm-rc-verify.sh run guests over TLS links):
# - property mistakes refused with what to do;
# - a pre-shared key, and x509 certificates with authz, link in TLS;
# - each way two QEMUs can disagree (a wrong key, TLS on one side only,
#   either way round, a certificate of another CA, a name authz does not
#   allow, a certificate that does not name the address connected to) is
#   said by both, with the reason and what to fix, once a minute however
#   often the peer retries (every second), and counted in info pvrdma;
#   the monitor answers throughout (a handshake never blocks QEMU).
# Keys and certificates are made here (tests/guest/tls-certs.sh).
. "$(dirname "$0")/lib.sh"

qemu=${PVRDMA_QEMU:-$PVRDMA_OUT/qemu-system-x86_64}
certs=$TEST_OUT/certs
mk=$TESTS_TOP/tests/guest/tls-certs.sh
rm -rf "$certs"
"$mk" ca "$certs/ca"
"$mk" ca "$certs/ca2" "another CA"
"$mk" member "$certs/ca" "$certs/a" host-a 127.0.0.1
"$mk" member "$certs/ca" "$certs/b" host-b 127.0.0.1
"$mk" member "$certs/ca2" "$certs/c" host-c 127.0.0.1
"$mk" member "$certs/ca" "$certs/n" host-n 192.0.2.9
"$mk" psk "$certs/psk"
"$mk" psk "$certs/psk2"
mkdir "$certs/half" && cp "$certs/a/ca-cert.pem" "$certs/a/server-cert.pem" \
    "$certs/a/server-key.pem" "$certs/half/"

base=(-M pc -nodefaults -accel tcg -L /usr/share/qemu -L /usr/share/seabios
      -display none)
psk() { # ENDPOINT DIR
    echo "tls-creds-psk,id=tls0,endpoint=$1,dir=$certs/$2"
}
x509() { # ENDPOINT DIR
    echo "tls-creds-x509,id=tls0,endpoint=$1,dir=$certs/$2"
}
authz() { # NAME: allow O=pvrdma,CN=NAME
    echo "authz-simple,id=authz0,identity=O=pvrdma,,CN=$1"
}

# Property mistakes: each named, with what to do.
refused() { # PROPS EXPECTED-TEXT [QEMU-ARG...]
    local out props=$1 text=$2
    shift 2
    if out=$(timeout 20 "$qemu" "${base[@]}" "$@" -device "pvrdma,$props" 2>&1 </dev/null); then
        fail "QEMU accepted $props"
    fi
    echo "$out" | grep -qE "$text" || fail "unclear error for $props: $out"
    pass "refused $props: $out"
}
L=fabric-listen=127.0.0.1:7599
refused "$L,fabric-tls-creds=nosuch" "fabric-tls-creds=nosuch names no TLS credentials: add -object tls-creds-psk"
refused "$L,fabric-tls-creds=tls0" "is tls-creds-anon, which lets anyone join" \
    -object tls-creds-anon,id=tls0,endpoint=server
refused "$L,fabric-tls-creds=tls0" "has verify-peer=off, so any certificate would do" \
    -object "$(x509 server a),verify-peer=off"
refused "$L,fabric-tls-creds=tls0,fabric-tls-authz=authz0" \
    "fabric-tls-authz checks the names of x509 certificates; with tls-creds-psk the key file is the list" \
    -object "$(psk server psk)" -object "$(authz host-b)"
refused "$L,fabric-tls-creds=tls0,fabric-tls-authz=nosuch" \
    "fabric-tls-authz=nosuch names no authorization object" -object "$(x509 server a)"
refused "fabric-path=$TEST_OUT,fabric-tls-creds=tls0" \
    "fabric-tls-creds protects TCP links: give it with fabric-listen or fabric-peer" \
    -object "$(psk server psk)"
refused "fabric-tls-authz=authz0,$L" "fabric-tls-authz only with fabric-tls-creds" \
    -object "$(authz host-b)"
refused "$L,fabric-tls-creds=tls0" \
    "client-cert.pem is missing: a fabric member makes links too .*directory must serve both ends" \
    -object "$(x509 server half)"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
info() { # a|b: info pvrdma of that QEMU
    timeout 10 python3 "$TESTS_TOP/tests/guest/qmp.py" "$TEST_OUT/$1.qmp" \
        human-monitor-command '{"command-line": "info pvrdma"}'
}
tls_refused() { # a|b: links that QEMU refused for their TLS
    info "$1" | sed -n 's/.*links refused for their user: [0-9]*, for their TLS: \([0-9]*\),.*/\1/p'
}
pids=()
stop_pair() {
    kill "${pids[@]}" 2> /dev/null || true
    wait "${pids[@]}" 2> /dev/null || true
    pids=()
}
trap stop_pair EXIT
# start_pair "A-OBJECTS..." "B-OBJECTS..." A-PROPS B-PROPS: A listens, B
# names it as fabric-peer; each QEMU's log in $TEST_OUT/{a,b}.log.
start_pair() {
    local r objs props port
    port=$(free_port)
    for r in a b; do
        if [ $r = a ]; then
            objs=$1 props="fabric-listen=127.0.0.1:$port$3"
        else
            objs=$2 props="fabric-listen=127.0.0.1:$(free_port),fabric-peer=127.0.0.1:$port$4"
        fi
        rm -f "$TEST_OUT/$r.qmp"
        # shellcheck disable=SC2086 # objects: one -object each
        "$qemu" "${base[@]}" $objs -device "pvrdma,$props" \
            -qmp "unix:$TEST_OUT/$r.qmp,server=on,wait=off" \
            > "$TEST_OUT/$r.log" 2>&1 &
        pids+=($!)
        for _ in $(seq 100); do
            info $r > /dev/null 2>&1 && break
            sleep 0.1
        done
    done
}
# wait_for TEST: up to 20 s
wait_for() {
    for _ in $(seq 100); do
        eval "$1" && return 0
        sleep 0.2
    done
    return 1
}
said() { # a|b PATTERN: lines of that QEMU's log matching
    grep -cE "$2" "$TEST_OUT/$1.log" || true
}
linked() { # NAME: both up in TLS, and info pvrdma says so
    wait_for '[ "$(said a "up \(TLS\)$")" -ge 1 ] && [ "$(said b "up \(TLS\)$")" -ge 1 ]' ||
        fail "$1: no TLS link came up: A: $(cat "$TEST_OUT/a.log") B: $(cat "$TEST_OUT/b.log")"
    info a | grep -q "tls, up" && info b | grep -q "tls, up" ||
        fail "$1: info pvrdma shows no TLS link: $(info a) $(info b)"
    stop_pair
    pass "$1: linked in TLS on both sides"
}
# disagree NAME A-PATTERN B-PATTERN COUNTED: each side says its reason
# (once, while B retries every second), neither comes up, and the sides
# in COUNTED (a, b or "a b") count at least two refused links.
disagree() {
    local name=$1 pa=$2 pb=$3 counted=$4 r
    for r in $counted; do
        wait_for '[ "$(tls_refused '$r')" -ge 2 ] 2> /dev/null' ||
            fail "$name: $r did not refuse two links for their TLS: $(info $r) $(cat "$TEST_OUT/$r.log")"
    done
    wait_for '[ "$(said a "$pa")" -ge 1 ] && [ "$(said b "$pb")" -ge 1 ]' ||
        fail "$name: the reasons were not said: A: $(cat "$TEST_OUT/a.log") B: $(cat "$TEST_OUT/b.log")"
    for r in a b; do
        [ "$(said $r ' up')" -eq 0 ] || fail "$name: a link came up: $(cat "$TEST_OUT/$r.log")"
        [ -z "$(sed -n 's/.* down: //p' "$TEST_OUT/$r.log" | sort | uniq -d)" ] ||
            fail "$name: $r said a reason more than once: $(cat "$TEST_OUT/$r.log")"
    done
    stop_pair
    pass "$name: A said \"$(grep -m1 -oE "$pa.*" "$TEST_OUT/a.log")\"; B said \"$(grep -m1 -oE "$pb.*" "$TEST_OUT/b.log")\""
}

start_pair "-object $(psk server psk)" "-object $(psk client psk)" \
    ,fabric-tls-creds=tls0 ,fabric-tls-creds=tls0
linked "a pre-shared key"
# The priority docs/fabric.md gives PSK objects (AES-GCM, not ChaCha20):
# the twin made for the other end takes it too.
start_pair "-object $(psk server psk),priority=NORMAL:-CHACHA20-POLY1305" \
    "-object $(psk client psk),priority=NORMAL:-CHACHA20-POLY1305" \
    ,fabric-tls-creds=tls0 ,fabric-tls-creds=tls0
linked "a pre-shared key, without ChaCha20"
start_pair "-object $(x509 server a) -object $(authz host-b)" \
    "-object $(x509 client b) -object $(authz host-a)" \
    ,fabric-tls-creds=tls0,fabric-tls-authz=authz0 \
    ,fabric-tls-creds=tls0,fabric-tls-authz=authz0
linked "x509 certificates of one CA, each side's name allowed by the other's authz"

start_pair "-object $(psk server psk)" "-object $(psk client psk2)" \
    ,fabric-tls-creds=tls0 ,fabric-tls-creds=tls0
disagree "two keys" "TLS handshake failed: .*same key" \
    "TLS handshake failed: .*same key" "a b"
start_pair "-object $(psk server psk)" "" ,fabric-tls-creds=tls0 ""
disagree "B without TLS" \
    "the peer speaks the fabric protocol without TLS: give it fabric-tls-creds" \
    "the peer closed the link before its HELLO .*fabric-tls-creds refuses one without" a
# Who speaks first decides which side sees the other's bytes: either
# side may say it, so each says one of the two.
start_pair "" "-object $(psk client psk)" "" ,fabric-tls-creds=tls0
disagree "A without TLS" \
    "the peer (speaks TLS: give this QEMU fabric-tls-creds|closed the link before its HELLO)" \
    "the peer speaks the fabric protocol without TLS|TLS handshake failed: .*same key" b
start_pair "-object $(x509 server a)" "-object $(x509 client c)" \
    ,fabric-tls-creds=tls0 ,fabric-tls-creds=tls0
disagree "a certificate of another CA" \
    "the peer's TLS credentials are refused: .*this QEMU's CA" \
    "the peer's TLS credentials are refused: The certificate hasn't got a known issuer" "a b"
start_pair "-object $(x509 server a) -object $(authz host-x)" \
    "-object $(x509 client b) -object $(authz host-a)" \
    ,fabric-tls-creds=tls0,fabric-tls-authz=authz0 \
    ,fabric-tls-creds=tls0,fabric-tls-authz=authz0
disagree "a name authz does not allow" \
    "TLS x509 authz check for O=pvrdma,CN=host-b is denied .*fabric-tls-authz" \
    "the peer (closed|broke) the link after the TLS handshake, before its HELLO.*it did not accept this QEMU.s TLS credentials" "a b"
start_pair "-object $(x509 server n)" "-object $(x509 client b)" \
    ,fabric-tls-creds=tls0 ,fabric-tls-creds=tls0
disagree "a certificate without the address connected to" \
    "the peer (closed|broke) the link after the TLS handshake, before its HELLO.*it did not accept this QEMU.s TLS credentials" \
    "Certificate does not match the hostname 127.0.0.1 .*name the address" "a b"
pass "TLS on TCP links: properties checked, three ways to link, six ways to disagree said on both sides"
