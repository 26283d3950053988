// Package dockercluster runs kgate as it is deployed, on the machine's
// Docker engine: etcd members (peer and client mutual TLS), a NATS
// cluster (TLS, the roles' credentials and permissions, routes over
// mutual TLS with their own password), cache nodes and gateways (mutual
// TLS on the read API, an encrypted gossip), each in its own container
// from the FROM scratch images `make images` builds, on a private bridge
// network named after the run. The host reaches it only through ports
// published on 127.0.0.1.
//
// It drives the docker CLI (os/exec): Start creates everything and waits
// until each member is ready, Close (and Remove, by label) removes every
// container and the network even after a half-made Start. Stop, Kill,
// StartMember, Pause, Disconnect and their inverses are the faults tests
// inject; DumpLogs keeps every container's output for a failed test.
// RoundRobin is the client-side load balancer tests send requests
// through. The deployment test (TestDockerDeployment) runs with
// `make test-docker`.
package dockercluster
