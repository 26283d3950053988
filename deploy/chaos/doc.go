// Package chaos runs kgate's fault suite on a Docker cluster
// (deploy/dockercluster): a seeded workload of writers, readers,
// watchers and client-go informers runs through every gateway while faults are injected one after
// another — kill -9 and restart of each role, partitions of one member or
// of one link, a frozen cache node, NATS route loss, etcd leader loss and
// a whole-etcd restart, a watcher that stops reading — and the checkers
// hold everything the clients saw against etcd's own history:
//
//   - watch: every watcher's events, over all its watch requests, equal
//     what the acknowledged writes imply from its start — none lost,
//     duplicated or reordered — and no watcher had to list again;
//   - informers: none had to list again, and each store ends equal to
//     etcd's state;
//   - writes: every acknowledged write is in etcd's history exactly once,
//     every 409 Conflict was a real conflict;
//   - reads: consistent GETs are linearizable (porcupine) and consistent
//     LISTs are exact snapshots no older than what was acknowledged
//     before them; resourceVersion=0 LISTs through one gateway never go
//     back in time;
//   - availability: the failed requests and the heal time per fault.
//
// Run writes a report (deploy/chaos/report). The suite runs with `make
// chaos` (10 minutes) and, as a 3-minute smoke, from .ci/run.
package chaos
