#!/usr/bin/env bash
# kgate and kube-apiserver side by side on one etcd (make bench-compare):
# the production roles of deploy/local/cluster.sh (etcd, nats-server,
# CACHENODES cache nodes with the default range splits, GATEWAYS gateways,
# the internal plane closed), then upstream's kube-apiserver of the same
# Kubernetes version (bench/kube-apiserver) on that etcd, with kgate's PKI:
# the same serving certificate and client CA, so one admin client
# certificate reaches both. The harness seeds once (objects in etcd serve
# both) and runs BENCH_FLAGS against kgate with kube-apiserver as
# --compare-kubeconfig, run i of each back to back; the report, with
# ratios, goes to BENCH_OUT/<timestamp>/.
#
# Both store built-in objects as protobuf in kube-apiserver's envelope
# (each reads what the other writes). kube-apiserver's endpoint reconciler
# is off, so the two do not take turns at the kubernetes Service's
# endpoints.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-$PWD/bin}
dir=${COMPARE_DIR:-$(mktemp -d /tmp/kgate-bench-compare.XXXXXX)}
mkdir -p "$dir"
cachenodes=${CACHENODES:-1}
gateways=${GATEWAYS:-1}
port=${PORT:-6443}
kas_port=${KAS_PORT:-6543}
out=${BENCH_OUT:-bench/results}
read -r -a flags <<<"${BENCH_FLAGS:---runs 3 --duration 5s}"

pids=()
stop() {
	trap - INT TERM EXIT
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	echo "bench-compare: logs in $dir"
}
trap stop INT TERM EXIT

CLUSTER_DIR=$dir/kgate CACHENODES=$cachenodes GATEWAYS=$gateways PORT=$port BIN=$bin \
	deploy/local/cluster.sh >"$dir/cluster.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 600); do
	grep -q "kgate cluster ready" "$dir/cluster.log" && break
	if ! kill -0 "${pids[0]}" 2>/dev/null; then
		cat "$dir/cluster.log" >&2
		exit 1
	fi
	sleep 0.2
done
grep -q "kgate cluster ready" "$dir/cluster.log" || { echo "kgate did not start" >&2; exit 1; }
pki=$dir/kgate/pki
in=$dir/kgate/internal

openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
"$bin/kube-apiserver" \
	--etcd-servers https://127.0.0.1:2379 --etcd-cafile "$in/ca.crt" \
	--etcd-certfile "$in/gateway.crt" --etcd-keyfile "$in/gateway.key" \
	--bind-address 127.0.0.1 --secure-port "$kas_port" \
	--tls-cert-file "$pki/serving.crt" --tls-private-key-file "$pki/serving.key" --client-ca-file "$pki/ca.crt" \
	--authorization-mode Node,RBAC \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$dir/sa.key" --service-account-signing-key-file "$dir/sa.key" \
	--service-cluster-ip-range 10.96.0.0/12 --endpoint-reconciler-type none \
	>"$dir/kube-apiserver.log" 2>&1 &
kas=$!
pids+=($kas)
for _ in $(seq 1 600); do
	curl -ksf "https://127.0.0.1:$kas_port/readyz" >/dev/null 2>&1 && break
	if ! kill -0 "$kas" 2>/dev/null; then
		tail -50 "$dir/kube-apiserver.log" >&2
		exit 1
	fi
	sleep 0.2
done
curl -ksf "https://127.0.0.1:$kas_port/readyz" >/dev/null || { echo "kube-apiserver did not become ready" >&2; exit 1; }
sed "s#https://127.0.0.1:$port#https://127.0.0.1:$kas_port#" "$pki/kubeconfig" >"$dir/kube-apiserver.kubeconfig"

kgate_pids=$(pgrep -d, -f "$bin/kgate (gateway|cachenode) " || true),$(pgrep -d, -f "$bin/nats-server" || true)
etcd_pid=$(pgrep -f "$bin/etcd " | head -1 || true)
echo "kgate pids $kgate_pids, kube-apiserver $kas, etcd $etcd_pid"
"$bin/kgate-bench" --kubeconfig "$pki/kubeconfig" --name kgate --pids "$kgate_pids" \
	--metrics-url "http://127.0.0.1:7460/metrics" \
	--compare-kubeconfig "$dir/kube-apiserver.kubeconfig" --compare-name kube-apiserver --compare-pids "$kas" \
	--etcd-endpoints https://127.0.0.1:2379 --etcd-cafile "$in/ca.crt" --etcd-certfile "$in/gateway.crt" --etcd-keyfile "$in/gateway.key" \
	--etcd-pids "$etcd_pid" --out "$out" "${flags[@]}"
