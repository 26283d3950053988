// Package e2e holds kgate's end-to-end tests: they build the kgate binary
// and the pinned upstream kubectl (cmd/kubectl), start `kgate dev` in a
// temporary data directory and drive it with kubectl as a user would.
//
// KGATE_BIN and KUBECTL_BIN, when set, name prebuilt binaries to use
// instead. The tests are skipped under -short.
package e2e
