// Package e2e holds kgate's end-to-end tests: they build the kgate binary
// and the pinned upstream kubectl (cmd/kubectl) and helm (cmd/helm), start
// `kgate dev` in a temporary data directory and drive it with kubectl and
// helm as a user would.
//
// KGATE_BIN, KUBECTL_BIN and HELM_BIN, when set, name prebuilt binaries to
// use instead (helm is built only when a helm test runs). The tests are
// skipped under -short.
package e2e
