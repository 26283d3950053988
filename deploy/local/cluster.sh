#!/usr/bin/env bash
# A kgate cluster as separate processes on this machine: a real etcd and a
# real nats-server (both built from their Go modules by `make cluster`),
# three cache nodes (two replicas per range) and two gateways joined by
# gossip. Ctrl-C stops everything. Data and logs live in $CLUSTER_DIR.
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

start etcd "$bin/etcd" --name default --data-dir "$dir/etcd" \
	--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster default=http://127.0.0.1:2380 --watch-progress-notify-interval 1s
printf 'listen: 127.0.0.1:4222\nmax_payload: 8MB\n' >"$dir/nats.conf"
start nats "$bin/nats-server" -c "$dir/nats.conf"
wait_http http://127.0.0.1:2379/health

"$bin/kgate" pki --dir "$dir/pki" --server "https://127.0.0.1:$port" >/dev/null
backend=(--etcd-servers http://127.0.0.1:2379 --nats-url nats://127.0.0.1:4222)
for i in $(seq 0 $((cachenodes - 1))); do
	join=()
	[ "$i" -gt 0 ] && join=(--join 127.0.0.1:7950)
	start "cachenode-$i" "$bin/kgate" cachenode --node-name "cachenode-$i" "${backend[@]}" \
		--listen "127.0.0.1:$((7440 + i))" --metrics-address "127.0.0.1:$((7460 + i))" \
		--cluster-bind-address "127.0.0.1:$((7950 + i))" "${join[@]}"
done
for i in $(seq 0 $((cachenodes - 1))); do wait_http "http://127.0.0.1:$((7460 + i))/readyz"; done
for i in $(seq 0 $((gateways - 1))); do
	start "gateway-$i" "$bin/kgate" gateway --node-name "gateway-$i" "${backend[@]}" \
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
