// Package dropin holds the tests of kgate beside upstream's
// kube-apiserver on one etcd, with one --encryption-provider-config:
// TestBesideKubeAPIServer runs kgate dev and kube-apiserver on kgate's
// etcd and checks that Pods, Deployments, Secrets (encrypted at rest) and
// a custom resource written through either are read identically through
// the other, and that a watch on either sees the other's writes;
// TestStoredBytes checks that kgate encodes what kube-apiserver stored to
// the very bytes it stored. They run the kube-apiserver binary that `make
// kube-apiserver` builds (KUBE_APISERVER_BIN); `make test-controlplane`
// builds it and runs them. DROPIN_DIR keeps the servers' data and logs.
package dropin
