#!/usr/bin/env bash
# A kgate cluster as separate processes on this machine: a real etcd and a
# real nats-server (both built from their Go modules by `make cluster`),
# three cache nodes (two replicas per range) and two gateways joined by
# gossip. Ctrl-C stops everything. Data and logs live in $CLUSTER_DIR.
# The internal plane is closed (kgate pki --internal-dir): etcd requires
# client certificates, NATS TLS and the roles' credentials, the cache
# nodes' read API mutual TLS, gossip a key. INSECURE_INTERNAL=1 opens it.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${BIN:-$PWD/bin}
dir=${CLUSTER_DIR:-$PWD/.kgate-cluster}
cachenodes=${CACHENODES:-3}
gateways=${GATEWAYS:-2}
port=${PORT:-6443}
mkdir -p "$dir/logs"

pids=()
stop() {
	trap - INT TERM EXIT
	echo "stopping..."
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap stop INT TERM EXIT

start() { # name, command...
	local name=$1
	shift
	"$@" >"$dir/logs/$name.log" 2>&1 &
	pids+=($!)
	echo "started $name (pid $!), log $dir/logs/$name.log"
}

wait_http() { # url
	for _ in $(seq 1 150); do
		if curl -ksf "$1" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	echo "timed out waiting for $1" >&2
	exit 1
}

"$bin/kgate" pki --dir "$dir/pki" --server "https://127.0.0.1:$port" --internal-dir "$dir/internal" >/dev/null
in=$dir/internal
if [ -n "${INSECURE_INTERNAL:-}" ]; then
	scheme=http
	etcd_tls=()
	printf 'listen: 127.0.0.1:4222\nmax_payload: 8MB\n' >"$dir/nats.conf"
	nats_url=nats://127.0.0.1:4222
	curl_etcd=()
else
	scheme=https
	etcd_tls=(--cert-file "$in/etcd-server.crt" --key-file "$in/etcd-server.key" --client-cert-auth --trusted-ca-file "$in/ca.crt")
	{ printf 'listen: 127.0.0.1:4222\nmax_payload: 8MB\n'; cat "$in/nats-server.conf"; } >"$dir/nats.conf"
	nats_url=tls://127.0.0.1:4222
	curl_etcd=(--cacert "$in/ca.crt" --cert "$in/cachenode.crt" --key "$in/cachenode.key")
fi
start etcd "$bin/etcd" --name default --data-dir "$dir/etcd" \
	--listen-client-urls $scheme://127.0.0.1:2379 --advertise-client-urls $scheme://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster default=http://127.0.0.1:2380 --watch-progress-notify-interval 1s "${etcd_tls[@]}"
start nats "$bin/nats-server" -c "$dir/nats.conf"
for _ in $(seq 1 150); do
	if curl -sf "${curl_etcd[@]}" "$scheme://127.0.0.1:2379/health" >/dev/null 2>&1; then break; fi
	sleep 0.2
done

backend() { # role
	echo --etcd-servers $scheme://127.0.0.1:2379 --nats-url $nats_url
	if [ -n "${INSECURE_INTERNAL:-}" ]; then
		echo --insecure-internal
	else
		echo --etcd-cafile "$in/ca.crt" --etcd-certfile "$in/$1.crt" --etcd-keyfile "$in/$1.key" \
			--internal-ca-file "$in/ca.crt" --internal-cert-file "$in/$1.crt" --internal-key-file "$in/$1.key" \
			--nats-credentials-file "$in/nats-$1.creds" --cluster-key-file "$in/cluster.key"
	fi
}
for i in $(seq 0 $((cachenodes - 1))); do
	join=()
	[ "$i" -gt 0 ] && join=(--join 127.0.0.1:7950)
	# CACHENODE_ENV: assignments for the cache nodes' environment
	# (GOMEMLIMIT=..., as a chart sets it from the memory limit).
	start "cachenode-$i" env ${CACHENODE_ENV:-} "$bin/kgate" cachenode --node-name "cachenode-$i" $(backend cachenode) \
		--listen "127.0.0.1:$((7440 + i))" --metrics-address "127.0.0.1:$((7460 + i))" \
		--cluster-bind-address "127.0.0.1:$((7950 + i))" "${join[@]}"
done
for i in $(seq 0 $((cachenodes - 1))); do wait_http "http://127.0.0.1:$((7460 + i))/readyz"; done
for i in $(seq 0 $((gateways - 1))); do
	start "gateway-$i" "$bin/kgate" gateway --node-name "gateway-$i" $(backend gateway) \
		--bind-address 127.0.0.1 --secure-port $((port + i)) \
		--cluster-bind-address "127.0.0.1:$((7970 + i))" --join 127.0.0.1:7950 \
		--tls-cert-file "$dir/pki/serving.crt" --tls-private-key-file "$dir/pki/serving.key" \
		--client-ca-file "$dir/pki/ca.crt"
done
for i in $(seq 0 $((gateways - 1))); do wait_http "https://127.0.0.1:$((port + i))/readyz"; done

cat <<TXT

kgate cluster ready: $cachenodes cache nodes, $gateways gateways (https://127.0.0.1:$port ... $((port + gateways - 1)))

  kubeconfig: $dir/pki/kubeconfig
  try:        kubectl --kubeconfig $dir/pki/kubeconfig get namespaces
  kill a cache node: kill \$(pgrep -f 'node-name cachenode-0')

Ctrl-C stops the cluster.
TXT
wait
