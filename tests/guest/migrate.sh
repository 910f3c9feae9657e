# shellcheck shell=bash
# Host-side helpers of the migration tests (sourced after lib.sh; QMP
# sockets are $d/qmp-NAME.sock):
#   qmp SOCK CMD [ARGS-JSON]   one QMP command (tests/guest/qmp.py)
#   free_port [SOCK_DGRAM]     a free TCP (or UDP) port on 127.0.0.1
#   migrate_wait NAME          the status NAME's migration ended with
#   migrate_info NAME          its total time and downtime, for the log
#   wait_running NAME          until NAME's guest runs (false after 60 s)
qmp() { python3 "$TESTS_TOP/tests/guest/qmp.py" "$@"; }

free_port() {
    python3 -c 'import socket, sys; s = socket.socket(type=getattr(socket, sys.argv[1])); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' "${1:-SOCK_STREAM}"
}

migrate_wait() {
    local st
    while :; do
        st=$(qmp "$d/qmp-$1.sock" query-migrate |
             python3 -c 'import json, sys; print(json.load(sys.stdin).get("status", "none"))')
        case $st in
        completed|failed|cancelled) echo "$st"; return ;;
        esac
        sleep 0.2
    done
}

migrate_info() {
    qmp "$d/qmp-$1.sock" query-migrate | python3 -c 'import json, sys; r = json.load(sys.stdin); print("total", r.get("total-time"), "ms, downtime", r.get("downtime"), "ms")'
}

# wait_running NAME: true once NAME's guest runs again (within 60 s).
# A source learns that its migration failed (query-migrate) a moment
# before it restarts its guest: one look at query-status could come in
# between.
wait_running() {
    local i
    for i in $(seq 600); do
        qmp "$d/qmp-$1.sock" query-status | grep -q '"running"' && return 0
        sleep 0.1
    done
    return 1
}
