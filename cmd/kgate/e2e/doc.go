// Package e2e holds kgate's end-to-end tests: they build the kgate binary
// and the pinned upstream kubectl (cmd/kubectl), helm (cmd/helm) and
// metrics-server (cmd/metrics-server), start `kgate dev` in a temporary
// data directory and drive it with kubectl and helm as a user would.
//
// KGATE_BIN, KUBECTL_BIN, HELM_BIN and METRICS_SERVER_BIN, when set, name
// prebuilt binaries to use instead (helm and metrics-server are built
// only when a test of theirs runs). The tests are skipped under -short.
package e2e
