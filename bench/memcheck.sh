#!/usr/bin/env bash
# make memcheck: does a cache node stay inside the memory limit the Helm
# chart gives it? The chart is rendered (MEMCHECK_SET: more --set values,
# e.g. cachenode.resources.limits.memory=3Gi for a limit GOMEMLIMIT
# binds at), and the cache node's memory limit and GOMEMLIMIT read from
# it; the production roles of deploy/local/cluster.sh start with one
# cache node under that GOMEMLIMIT; the bench harness's memory scenario
# loads MEMCHECK_PODS pods (default 100,000) through the API. The check
# passes when the cache node's peak RSS (VmHWM) stayed below the limit
# and its peak heap (go_memstats_heap_inuse_bytes) below GOMEMLIMIT. The
# harness's report and the verdict (memcheck.txt) go to BENCH_OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-$PWD/bin}
dir=${MEMCHECK_DIR:-$(mktemp -d /tmp/kgate-memcheck.XXXXXX)}
pods=${MEMCHECK_PODS:-100000}
out=${BENCH_OUT:-bench/results}
port=${PORT:-6443}
mkdir -p "$dir" "$out"

set_flags=()
for s in ${MEMCHECK_SET:-}; do set_flags+=(--set "$s"); done
"$bin/helm" template kgate deploy/helm/kgate "${set_flags[@]}" --show-only templates/cachenode.yaml >"$dir/cachenode.yaml"
limit=$(awk '/limits:/ {l=1} l && /memory:/ {gsub(/[{}]/, ""); for (i = 1; i <= NF; i++) if ($i == "memory:") {print $(i+1); exit}}' "$dir/cachenode.yaml")
gomemlimit=$(grep -A1 'name: GOMEMLIMIT' "$dir/cachenode.yaml" | sed -n 's/.*value: "\{0,1\}\([0-9]*MiB\)"\{0,1\}.*/\1/p' | head -1)
[ -n "$limit" ] && [ -n "$gomemlimit" ] || { echo "memcheck: no memory limit or GOMEMLIMIT in the chart's cache node" >&2; exit 1; }
bytes() { # a Kubernetes quantity in bytes (the units the chart's helper takes)
	local n=${1%%[!0-9]*} u=${1##*[0-9]}
	case $u in
	"") echo "$n" ;; k) echo $((n * 1000)) ;; M) echo $((n * 1000 ** 2)) ;; G) echo $((n * 1000 ** 3)) ;;
	Ki) echo $((n * 1024)) ;; Mi | MiB) echo $((n * 1024 ** 2)) ;; Gi) echo $((n * 1024 ** 3)) ;; Ti) echo $((n * 1024 ** 4)) ;;
	*) echo "memcheck: cannot read quantity $1" >&2; exit 1 ;;
	esac
}
limit_bytes=$(bytes "$limit")
gomem_bytes=$(bytes "$gomemlimit")
echo "memcheck: the chart's cache node: memory limit $limit, GOMEMLIMIT $gomemlimit; loading $pods pods"

pids=()
stop() {
	trap - INT TERM EXIT
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	echo "memcheck: logs in $dir"
}
trap stop INT TERM EXIT
CLUSTER_DIR=$dir/kgate CACHENODES=1 GATEWAYS=1 PORT=$port BIN=$bin CACHENODE_ENV="GOMEMLIMIT=$gomemlimit" \
	deploy/local/cluster.sh >"$dir/cluster.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 600); do
	grep -q "kgate cluster ready" "$dir/cluster.log" && break
	kill -0 "${pids[0]}" 2>/dev/null || { cat "$dir/cluster.log" >&2; exit 1; }
	sleep 0.2
done
grep -q "kgate cluster ready" "$dir/cluster.log" || { echo "memcheck: kgate did not start" >&2; exit 1; }
node=$(pgrep -f "$bin/kgate cachenode " | head -1)
[ "$(tr '\0' '\n' </proc/"$node"/environ | grep '^GOMEMLIMIT=')" = "GOMEMLIMIT=$gomemlimit" ] ||
	{ echo "memcheck: the cache node (pid $node) does not run with GOMEMLIMIT=$gomemlimit" >&2; exit 1; }

# The heap's peak, sampled beside the harness's own samples.
heap_peak=$dir/heap-peak
echo 0 >"$heap_peak"
(
	peak=0
	while kill -0 "$node" 2>/dev/null; do
		h=$(curl -sf http://127.0.0.1:7460/metrics | awk '$1 == "go_memstats_heap_inuse_bytes" {printf "%.0f", $2}' || true)
		if [ -n "$h" ] && [ "$h" -gt "$peak" ]; then peak=$h; echo "$peak" >"$heap_peak"; fi
		sleep 0.25
	done
) &
pids+=($!)

"$bin/kgate-bench" --kubeconfig "$dir/kgate/pki/kubeconfig" --name "kgate cache node (limit $limit, GOMEMLIMIT $gomemlimit)" \
	--pids "$node" --metrics-url http://127.0.0.1:7460/metrics \
	--runs 1 --namespaces 1 --pods 1 --configmaps 1 --concurrency "${MEMCHECK_CONCURRENCY:-32}" --out "$out" --scenario "memory,pods=$pods,keep=true" --cleanup=false

rss_peak=$(awk '/^VmHWM:/ {printf "%.0f", $2 * 1024}' /proc/"$node"/status)
heap=$(cat "$heap_peak")
mib() { echo $(($1 / 1024 / 1024)); }
verdict=PASS
[ "$rss_peak" -lt "$limit_bytes" ] || verdict=FAIL
[ "$heap" -lt "$gomem_bytes" ] || verdict=FAIL
line="memcheck $verdict: $pods pods; cache node peak RSS $(mib "$rss_peak") MiB of its $(mib "$limit_bytes") MiB limit, peak heap $(mib "$heap") MiB of GOMEMLIMIT $(mib "$gomem_bytes") MiB (chart: ${MEMCHECK_SET:-defaults})"
echo "$line" | tee "$out/memcheck.txt"
[ "$verdict" = PASS ]
