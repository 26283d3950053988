// Package dropin holds the test of kgate beside upstream's kube-apiserver
// on one etcd: each reads what the other wrote, built-in objects in
// kube-apiserver's protobuf envelope and encrypted at rest with the same
// --encryption-provider-config, byte for byte. It runs the kube-apiserver
// binary that `make kube-apiserver` builds (KUBE_APISERVER_BIN); `make
// test-controlplane` builds it and runs the test.
package dropin
