#!/usr/bin/env bash
# run.sh runs upstream's api-machinery conformance specs for custom
# resources against a fresh `kgate dev` (`make conformance`): it starts kgate
# dev on a free loopback port with its own data directory, runs bin/e2e.test
# (built by cmd/e2e from k8s.io/kubernetes/test/e2e) with that kubeconfig and
# bin/kubectl, and prints the count of passed, failed and skipped specs last.
# It exits non-zero when a spec failed or the run could not start.
#
# Only specs that need nothing but the API run here: no pod ever runs, and
# a spec that deploys a webhook or an aggregated server dials its Service's
# cluster IP, which would send traffic off this machine. Those are skipped
# by name (SKIP) and counted as skipped.
#
# Environment: BIN (default ./bin), OUT (logs and reports; default a new
# temporary directory, kept), FOCUS and SKIP (Go regexps, as below),
# E2E_FLAGS (more e2e.test flags, e.g. --ginkgo.v).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${BIN:-$PWD/bin}
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/kgate-conformance.XXXXXX")}
mkdir -p "$out"

# The [Conformance] specs of the four api-machinery areas of custom
# resources (upstream's spec texts; a focus on the whole text).
FOCUS=${FOCUS:-'\[sig-api-machinery\] (CustomResourceDefinition resources|CustomResourceDefinition Watch|CustomResourcePublishOpenAPI|FieldValidation) .*\[Conformance\]'}
# Specs that deploy pods or dial a Service cluster IP.
SKIP=${SKIP:-'AdmissionWebhook|CustomResourceConversionWebhook|Aggregator|sample-apiserver|CustomResourceFieldSelectors|[Ww]ebhook|[Pp]od'}

for b in kgate kubectl e2e.test; do
	[ -x "$bin/$b" ] || { echo "run.sh: $bin/$b missing (make build kubectl $bin/e2e.test)" >&2; exit 2; }
done

kgate_pid=
stop() {
	if [ -n "$kgate_pid" ] && kill -0 "$kgate_pid" 2>/dev/null; then
		kill -TERM "$kgate_pid"
		wait "$kgate_pid" 2>/dev/null || true
	fi
}
trap stop EXIT
trap 'exit 130' INT TERM

# A free loopback port: one nobody listens on now; kgate's own listen
# decides, and a taken one is tried again with another port.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		if [ -z "$(ss -Htln "sport = :$p")" ]; then
			echo "$p"
			return
		fi
	done
}

kubeconfig=
for attempt in 1 2 3; do
	port=$(free_port)
	data=$out/kgate-data
	rm -rf "$data"
	"$bin/kgate" dev --data-dir "$data" --listen "127.0.0.1:$port" >"$out/kgate.log" 2>&1 &
	kgate_pid=$!
	for _ in $(seq 1 600); do # 60 s until it prints its kubeconfig
		kubeconfig=$(sed -n 's/^  kubeconfig: //p' "$out/kgate.log")
		[ -n "$kubeconfig" ] && break
		kill -0 "$kgate_pid" 2>/dev/null || break
		sleep 0.1
	done
	[ -n "$kubeconfig" ] && break
	kill -TERM "$kgate_pid" 2>/dev/null || true
	wait "$kgate_pid" 2>/dev/null || true
	kgate_pid=
	echo "run.sh: kgate dev did not start on 127.0.0.1:$port (attempt $attempt); log:" >&2
	tail -20 "$out/kgate.log" >&2
done
[ -n "$kubeconfig" ] || exit 1
for _ in $(seq 1 150); do
	if [ "$("$bin/kubectl" --kubeconfig "$kubeconfig" get --raw /readyz 2>/dev/null)" = ok ]; then
		break
	fi
	sleep 0.2
done
echo "kgate dev on 127.0.0.1:$port (pid $kgate_pid), log $out/kgate.log, kubeconfig $kubeconfig"

# The cluster has no nodes and no kube-controller-manager:
#   --allowed-not-ready-nodes=-1  no wait for ready nodes or system daemonsets
#   --num-nodes=0                 no auto-detection of schedulable nodes
#   --minStartupPods=-1           no wait for kube-system pods
#   --e2e-verify-service-account=false
#                                 kgate creates the "default" service
#                                 account, but kube-root-ca.crt is published
#                                 by kube-controller-manager, which is not here
#   --disable-log-dump            no cluster/log-dump/log-dump.sh (a script of
#                                 upstream's repository, run by the AfterSuite)
e2e_flags=(
	--kubeconfig="$kubeconfig" --kubectl-path="$bin/kubectl" --provider=skeleton
	--allowed-not-ready-nodes=-1 --num-nodes=0 --minStartupPods=-1
	--e2e-verify-service-account=false --disable-log-dump
	--report-dir="$out" --ginkgo.no-color --ginkgo.focus="$FOCUS"
)

# How many specs the focus selects before SKIP: those not run are counted
# as skipped.
"$bin/e2e.test" "${e2e_flags[@]}" --ginkgo.dry-run >"$out/dry-run.log" 2>&1 || true
focused=$(sed -n 's/^Ran \([0-9]*\) of [0-9]* Specs.*/\1/p' "$out/dry-run.log" | tail -1)

status=0
# shellcheck disable=SC2086 # E2E_FLAGS is split on purpose
"$bin/e2e.test" "${e2e_flags[@]}" --ginkgo.skip="$SKIP" ${E2E_FLAGS:-} 2>&1 | tee "$out/e2e.log" || status=$?

line=$(grep -E '^(SUCCESS|FAIL)! .*[0-9]+ Passed \| [0-9]+ Failed' "$out/e2e.log" | tail -1 || true)
if [ -z "$line" ] || [ -z "$focused" ]; then
	echo "run.sh: e2e.test printed no summary; see $out/e2e.log and $out/dry-run.log" >&2
	exit 1
fi
passed=$(sed -n 's/.* \([0-9]*\) Passed .*/\1/p' <<<"$line")
failed=$(sed -n 's/.* \([0-9]*\) Failed .*/\1/p' <<<"$line")
skipped=$((focused - passed - failed))
echo
echo "logs and reports: $out"
echo "conformance: $passed passed, $failed failed, $skipped skipped"
exit "$status"
