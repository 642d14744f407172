#!/bin/sh
# Router entrypoint: writes the `peers routers` section for this pod, then runs HAProxy with
# haproxy.cfg and that section. Extra arguments go to haproxy (`sh router-start.sh -c` checks).
#
# Why generated: HAProxy wants the local peer listed without an address and every other peer with
# one, so one static file cannot serve every replica of the StatefulSet; and HAProxy resolves peer
# addresses once, at start, refusing to start if one does not resolve (haproxy/haproxy#930). So
# each remote peer's DNS record is awaited (bounded); a peer still unknown then is left out, so a
# router whose sibling is gone (node lost) still starts and routes, only without table sync.
#
# Environment: HOSTNAME (<statefulset>-<ordinal>), POD_NAMESPACE, ROUTER_REPLICAS (the
# StatefulSet's replicas), PEER_WAIT_S (default 60), HAPROXY_CFG_DIR (this file's folder).
set -eu

cfg_dir="${HAPROXY_CFG_DIR:-$(dirname "$0")}"
peers_file="${PEERS_FILE:-/var/run/haproxy-peers.cfg}"
name="${HOSTNAME%-*}"
wait_s="${PEER_WAIT_S:-60}"

resolves() {
    getent hosts "$1" >/dev/null 2>&1 || nslookup "$1" >/dev/null 2>&1
}

{
    echo "peers routers"
    echo "    bind :10000"
    i=0
    while [ "$i" -lt "${ROUTER_REPLICAS:-2}" ]; do
        peer="$name-$i"
        if [ "$peer" = "$HOSTNAME" ]; then
            echo "    server $peer"
        else
            fqdn="$peer.$name-peers.$POD_NAMESPACE.svc.cluster.local"
            waited=0
            until resolves "$fqdn" || [ "$waited" -ge "$wait_s" ]; do
                sleep 1
                waited=$((waited + 1))
            done
            if resolves "$fqdn"; then
                echo "    server $peer $fqdn:10000"
            else
                echo "router-start: peer $fqdn does not resolve after ${wait_s}s; starting without it" >&2
            fi
        fi
        i=$((i + 1))
    done
} > "$peers_file"

# -W -db as the image's own entrypoint passes: master-worker, stay in the foreground.
exec haproxy -W -db -f "$cfg_dir/haproxy.cfg" -f "$peers_file" "$@"
