# kgate — see README.md. `make help` lists the targets.

GO       ?= go
BIN      := $(CURDIR)/bin
KGATE    := $(BIN)/kgate
KUBECTL  := $(BIN)/kubectl
HELM     := $(BIN)/helm
KCM      := $(BIN)/kube-controller-manager
KUBE_SCHEDULER := $(BIN)/kube-scheduler
KWOK     := $(BIN)/kwok
METRICS_SERVER := $(BIN)/metrics-server
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
DATA_DIR ?= .kgate
LISTEN   ?= 127.0.0.1:6443
FUZZTIME ?= 30s
# k8s.io/kubernetes and the staging modules (k8s.io/api, ...) it is built with.
K8S_VERSION ?= v1.37.2
K8S_STAGING_VERSION ?= v0.37.2

KUBECTL_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=37 \
	-X k8s.io/component-base/version.gitVersion=v1.37.2 \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z

# helm's own version variables (its Makefile sets the same); keep in step
# with helm.sh/helm/v4 in cmd/helm/go.mod.
HELM_LDFLAGS := -s -w \
	-X helm.sh/helm/v4/internal/version.version=v4.3.1 \
	-X helm.sh/helm/v4/internal/version.gitTreeState=clean

# metrics-server's own version variable (its Makefile sets the same); keep
# in step with sigs.k8s.io/metrics-server in cmd/metrics-server/go.mod.
METRICS_SERVER_LDFLAGS := -s -w \
	-X k8s.io/client-go/pkg/version.gitVersion=v0.8.0

.PHONY: help build kubectl helm kube-controller-manager kube-scheduler kwok metrics-server test-controlplane run cluster etcd-nats images test test-unit test-integration test-e2e bench fuzz verify clean k8s-replace conformance

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/kgate
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(KGATE) ./cmd/kgate

kubectl: ## build bin/kubectl from its Go module (pinned in cmd/kubectl/go.mod)
	cd cmd/kubectl && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBECTL_LDFLAGS)" -o $(KUBECTL) .

helm: ## build bin/helm from helm's own main package (helm.sh/helm/v4/cmd/helm, pinned in cmd/helm/go.mod)
	cd cmd/helm && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(HELM_LDFLAGS)" -o $(HELM) helm.sh/helm/v4/cmd/helm

# kube-controller-manager and kube-scheduler: upstream's own main packages,
# built from k8s.io/kubernetes in their nested modules with the version
# flags kubectl gets (KUBECTL_LDFLAGS: the same v1.37.2). Built one at a
# time: each is a heavy build.
kube-controller-manager: ## build bin/kube-controller-manager from k8s.io/kubernetes (pinned in cmd/kube-controller-manager/go.mod)
	cd cmd/kube-controller-manager && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBECTL_LDFLAGS)" -o $(KCM) k8s.io/kubernetes/cmd/kube-controller-manager

kube-scheduler: ## build bin/kube-scheduler from k8s.io/kubernetes (pinned in cmd/kube-scheduler/go.mod)
	cd cmd/kube-scheduler && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBECTL_LDFLAGS)" -o $(KUBE_SCHEDULER) k8s.io/kubernetes/cmd/kube-scheduler

kwok: ## build bin/kwok from sigs.k8s.io/kwok (pinned in cmd/kwok/go.mod)
	cd cmd/kwok && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(KWOK) sigs.k8s.io/kwok/cmd/kwok

metrics-server: ## build bin/metrics-server from sigs.k8s.io/metrics-server (pinned in cmd/metrics-server/go.mod)
	cd cmd/metrics-server && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(METRICS_SERVER_LDFLAGS)" -o $(METRICS_SERVER) sigs.k8s.io/metrics-server/cmd/metrics-server

# e2e.test: upstream's e2e suite (k8s.io/kubernetes/test/e2e, pinned in
# cmd/e2e/go.mod) with the api-machinery specs. A heavy build (several
# minutes cold): rebuilt only when cmd/e2e changes.
E2E_TEST := $(BIN)/e2e.test

$(E2E_TEST): cmd/e2e/go.mod cmd/e2e/go.sum cmd/e2e/e2e_test.go
	cd cmd/e2e && CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags "$(KUBECTL_LDFLAGS)" -o $(E2E_TEST) .

conformance: build kubectl $(E2E_TEST) ## upstream's [Conformance] specs for CRDs and field validation against a fresh kgate dev (not in make test)
	BIN=$(BIN) deploy/conformance/run.sh

k8s-replace: ## regenerate go.mod's replace block pinning k8s.io/kubernetes's staging modules, then tidy
	GO=$(GO) deploy/k8smod/replace.sh $(K8S_VERSION) $(K8S_STAGING_VERSION) go.mod
	$(GO) mod tidy

run: build ## run kgate dev (embedded etcd and NATS) on $(LISTEN), data in $(DATA_DIR)
	$(KGATE) dev --data-dir $(DATA_DIR) --listen $(LISTEN)

# The packages that run whole kgate clusters in the test process (etcd,
# NATS, cache nodes and gateways, under -race): `make test` runs them after
# the others, one at a time. Beside other packages on 2 cores their etcd
# calls outlasted the clusters' 5 s timeouts (CI runs of 2026-11-27: the
# two took 443-584 s there, 240 s and 179 s side by side alone).
CLUSTER_PKGS := ./deploy/devcluster/ ./deploy/watchcheck/

test: build kubectl helm metrics-server ## vet, then every test with -race (unit, integration, end-to-end with kubectl, helm and metrics-server), the cluster packages last and one at a time
	$(GO) vet ./...
	KGATE_BIN=$(KGATE) KUBECTL_BIN=$(KUBECTL) HELM_BIN=$(HELM) METRICS_SERVER_BIN=$(METRICS_SERVER) \
		$(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -v -x -F $(foreach p,$(CLUSTER_PKGS),-e github.com/kgate/kgate/$(patsubst ./%/,%,$(p))))
	$(GO) test -race -count=1 -timeout 20m -p 1 $(CLUSTER_PKGS)

test-unit: ## unit tests only (-short skips everything that starts etcd, NATS or the binary)
	$(GO) test -short -count=1 ./...

test-integration: build kubectl helm metrics-server ## integration and end-to-end tests without -race
	KGATE_BIN=$(KGATE) KUBECTL_BIN=$(KUBECTL) HELM_BIN=$(HELM) METRICS_SERVER_BIN=$(METRICS_SERVER) $(GO) test -count=1 -timeout 20m ./...

test-e2e: build kubectl helm metrics-server ## the end-to-end tests alone
	KGATE_BIN=$(KGATE) KUBECTL_BIN=$(KUBECTL) HELM_BIN=$(HELM) METRICS_SERVER_BIN=$(METRICS_SERVER) $(GO) test -count=1 -v ./cmd/kgate/e2e/

test-controlplane: build kubectl kube-controller-manager kube-scheduler kwok kube-apiserver ## kube-controller-manager, kube-scheduler and kwok (3 fake nodes) against kgate dev, and kgate beside kube-apiserver on one etcd (builds ~7 min, tests ~3 min; run by .ci/run)
	KGATE_BIN=$(KGATE) KUBECTL_BIN=$(KUBECTL) KCM_BIN=$(KCM) KUBE_SCHEDULER_BIN=$(KUBE_SCHEDULER) KWOK_BIN=$(KWOK) \
		$(GO) test -count=1 -v -timeout 30m -run '^TestControlPlane$$' ./cmd/kgate/e2e/
	KUBE_APISERVER_BIN=$(KUBE_APISERVER) $(GO) test -count=1 -v -timeout 10m ./deploy/dropin/

# bench: the load harness (bench/) against a kgate dev it starts and stops
# itself; results in bench/results/<timestamp>/ (results.json, results.md,
# PNG plots). BENCH_FLAGS overrides the short default suite; see
# bench/README.md for running any scenario against another server.
BENCH      := $(BIN)/kgate-bench
BENCH_OUT  ?= bench/results
BENCH_FLAGS ?= --runs 3 --duration 2s --concurrency 8 \
	--namespaces 10 --pods 1000 --configmaps 200 --configmap-size 1024 \
	--scenario memory,pods=6000 \
	--scenario get \
	--scenario list,variants=ns/consistent/all/proto+ns/rv0/all/json+cluster/consistent/paged/proto+cluster/rv0/all/json \
	--scenario watch,watchers=50,events=50 \
	--scenario write \
	--scenario mixed,informers=3,rate=50 \
	--scenario etcd \
	--cleanup=false

.PHONY: bench bench-build bench-against bench-micro bench-compare kube-apiserver memcheck

bench: build bench-build ## load suite against a fresh kgate dev (~3 min): JSON, Markdown, PNG in bench/results/
	$(BENCH) --start-kgate $(KGATE) --out $(BENCH_OUT) $(BENCH_FLAGS)

bench-build: ## build bin/kgate-bench
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BENCH) ./bench/cmd/kgate-bench

bench-against: bench-build ## the same suite against KUBECONFIG (and COMPARE_KUBECONFIG, PIDS, ETCD_ENDPOINTS if set)
	@test -n "$(KUBECONFIG)" || { echo "set KUBECONFIG=path (COMPARE_KUBECONFIG, PIDS, COMPARE_PIDS, ETCD_ENDPOINTS optional)"; exit 1; }
	$(BENCH) --kubeconfig $(KUBECONFIG) $(if $(PIDS),--pids $(PIDS)) \
		$(if $(COMPARE_KUBECONFIG),--compare-kubeconfig $(COMPARE_KUBECONFIG)) $(if $(COMPARE_PIDS),--compare-pids $(COMPARE_PIDS)) \
		$(if $(ETCD_ENDPOINTS),--etcd-endpoints $(ETCD_ENDPOINTS)) \
		--out $(BENCH_OUT) $(filter-out --cleanup=false,$(BENCH_FLAGS))

# kube-apiserver for the side-by-side comparison only: upstream's own main
# package from k8s.io/kubernetes in its nested module, never linked into
# kgate; the version flags kubectl gets (v1.37.2).
KUBE_APISERVER := $(BIN)/kube-apiserver

kube-apiserver: ## build bin/kube-apiserver from k8s.io/kubernetes (pinned in bench/kube-apiserver/go.mod), for bench-compare
	cd bench/kube-apiserver && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBECTL_LDFLAGS)" -o $(KUBE_APISERVER) k8s.io/kubernetes/cmd/kube-apiserver

# bench-compare's own suite (issue 15): 10,000 seeded Pods listed cluster-wide
# (consistent and rv=0, JSON and protobuf, bodies counted, not decoded, so
# the harness does not starve the servers of the two cores), watch fan-out
# at 1,000 watchers on one client and on a client each and at 10,000,
# writes, informers on the split Pods, the etcd baseline, and memory at
# 100,000 Pods. BENCH_FLAGS on the command line replaces it.
COMPARE_FLAGS ?= --runs 3 --duration 5s --concurrency 8 --pods 10000 --configmaps 200 \
	--scenario get \
	--scenario list,decode=false,variants=cluster/consistent/all/json+cluster/rv0/all/json+cluster/consistent/all/proto+cluster/rv0/all/proto \
	--scenario list,variants=ns/consistent/all/proto+ns/rv0/all/json \
	--scenario watch,watchers=1000,events=50 \
	--scenario watch,watchers=1000,events=50,clients=0 \
	--scenario watch,watchers=10000,events=10 \
	--scenario write \
	--scenario mixed,informers=3,rate=50 \
	--scenario etcd \
	--scenario memory,pods=100000

bench-compare: build etcd-nats bench-build kube-apiserver ## kgate (production roles: CACHENODES, GATEWAYS, default 1 and 1) and kube-apiserver side by side on one etcd; COMPARE_FLAGS (or BENCH_FLAGS given); report with ratios in bench/results/
	BIN=$(BIN) BENCH_OUT=$(BENCH_OUT) BENCH_FLAGS="$(if $(filter command line environment,$(origin BENCH_FLAGS)),$(BENCH_FLAGS),$(COMPARE_FLAGS))" bench/compare.sh

memcheck: build etcd-nats bench-build helm ## a cache node under the chart's memory limit and GOMEMLIMIT through the memory scenario (MEMCHECK_PODS, default 100000; MEMCHECK_SET: more chart values); fails past the limit
	BIN=$(BIN) BENCH_OUT=$(BENCH_OUT) bench/memcheck.sh

bench-micro: ## micro-benchmarks with allocations
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2000x ./...

fuzz: ## run every fuzz target for $(FUZZTIME)
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

verify: ## gofmt, go vet, go.mod tidiness
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) mod tidy -diff

cluster: build etcd-nats ## run etcd, nats-server, 3 cache nodes and 2 gateways as separate processes (Ctrl-C stops)
	BIN=$(BIN) ./deploy/local/cluster.sh

etcd-nats: ## build bin/etcd and bin/nats-server from their Go modules (static)
	cd deploy/local/etcd && CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/etcd .
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/nats-server github.com/nats-io/nats-server/v2

.PHONY: manifests

manifests: helm ## render the Helm chart's defaults into the kustomize base (deploy/kubernetes/kgate.yaml)
	{ echo '# Generated by `make manifests` from deploy/helm/kgate (its default values): do not edit.'; \
	  $(HELM) template kgate deploy/helm/kgate --namespace kgate; } > deploy/kubernetes/kgate.yaml

# IMAGE_TAG tags the images; test-docker runs the ones it names.
IMAGE_TAG ?= latest

images: build etcd-nats ## build kgate/kgate, kgate/etcd, kgate/nats-server images FROM scratch (local Docker), tagged $(IMAGE_TAG)
	BIN=$(BIN) TAG=$(IMAGE_TAG) ./deploy/images/build.sh

.PHONY: test-docker

test-docker: images kubectl ## deployment test on Docker: 3 etcd, 3 NATS, 3 cache nodes, 2 gateways with internal TLS; kubectl; rolling gateway restart under load
	KGATE_DOCKER_TEST=1 KGATE_BIN=$(KGATE) KUBECTL_BIN=$(KUBECTL) KGATE_IMAGE_TAG=$(IMAGE_TAG) \
		$(GO) test -race -count=1 -v -timeout 15m -run 'TestDockerDeployment' ./deploy/dockercluster/

CHAOS_DURATION ?= 10m
CHAOS_RESULTS ?= $(CURDIR)/deploy/chaos/results
# The smoke run's faults: one of each kind of thing that can go wrong.
CHAOS_SMOKE_FAULTS ?= kill -9 cachenode|kill -9 gateway|kill -9 the etcd leader|NATS route loss|frozen cachenode
CHAOS_ENV = KGATE_CHAOS_TEST=1 KGATE_BIN=$(KGATE) KGATE_IMAGE_TAG=$(IMAGE_TAG) CHAOS_SEED=$(CHAOS_SEED)

.PHONY: chaos chaos-smoke soak

SOAK_DURATION ?= 1h
SOAK_WATCHERS ?= 10000
SOAK_WRITES ?= 500

soak: images ## steady load on Docker: SOAK_DURATION (1h) of SOAK_WRITES (500) writes/s and SOAK_WATCHERS (10000) watchers, memory and goroutines sampled each minute; soak.md in deploy/chaos/results/
	KGATE_SOAK_TEST=1 KGATE_BIN=$(KGATE) KGATE_IMAGE_TAG=$(IMAGE_TAG) SOAK_DURATION=$(SOAK_DURATION) SOAK_WATCHERS=$(SOAK_WATCHERS) \
		SOAK_WRITES=$(SOAK_WRITES) SOAK_SAMPLE=$(SOAK_SAMPLE) SOAK_RESULTS=$(CHAOS_RESULTS) \
		$(GO) test -count=1 -v -timeout 0 -run 'TestSoak$$' ./deploy/chaos/

chaos: images ## fault suite on Docker (3 etcd, 3 NATS, 3 cache nodes, 3 gateways): every fault, checked; CHAOS_DURATION (10m), CHAOS_SEED; report in deploy/chaos/results/
	$(CHAOS_ENV) CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_RESULTS=$(CHAOS_RESULTS) \
		$(GO) test -count=1 -v -timeout 60m -run 'TestChaos$$' ./deploy/chaos/

chaos-smoke: images ## 3-minute run of the fault suite (run by .ci/run when Docker is available); report in a temporary directory
	$(CHAOS_ENV) CHAOS_DURATION=3m CHAOS_HOLD=10s CHAOS_FAULTS='$(CHAOS_SMOKE_FAULTS)' \
		$(GO) test -count=1 -v -timeout 30m -run 'TestChaos$$' ./deploy/chaos/

clean: ## remove bin/
	rm -rf $(BIN)
