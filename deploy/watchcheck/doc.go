// Package watchcheck proves kgate's watch and list contract against
// kube-apiserver's semantics with randomized, fault-injected runs: a
// writer changes ConfigMaps through the API and records every
// acknowledged write (verified against etcd's history), watchers with
// random start revisions and selectors stream through client-go, and each
// stream is compared with the sequence the writes imply.
//
// The package holds the helpers: Cluster, an in-process kgate whose NATS
// server and cache node can be stopped and started again on the same
// addresses; Multi, kgate scaled out (cache nodes and gateways composed
// by deploy/role, each killed, stopped and started on its own); Proxy, an
// L4 load balancer in front of gateways; Truth, etcd read directly; and
// History, the model of the writes from which expected watch streams and
// states are derived. The checks themselves are tests
// (go test ./deploy/watchcheck; see watch_test.go for the soak knobs):
// the contract on one node under faults (TestWatchContract) and scaled out
// under node and gateway failures (TestScaleOutContract), the
// resourceVersion table (TestResourceVersionTable), a gateway drained
// under informers (TestGatewayDrain), a gateway stopped with watches
// open leaving none running (TestStopEndsWatches), lists during rebalancing
// (TestListDuringRebalance), reads across split ranges
// (TestSplitRanges) and a controller-runtime manager reconciling a custom
// resource through a gateway restart without listing again
// (TestControllerRuntime).
package watchcheck
