// Package watchhub fans the events cache nodes publish on NATS out to the
// watchers of one gateway. Each range has one feed: one NATS subscription
// shared by all local watchers of that range. The feed keeps a cursor (every
// event up to it has been dispatched), drops what it already dispatched,
// and repairs gaps — a lost NATS message, a reconnect, a cache node failover
// — from the cache node's window, so every watcher sees every event after
// its start revision exactly once and in order.
//
// A watch across several ranges merges their watchers in revision order:
// an event is released once every other range is known complete up to
// its revision, and a quiet range's primary is asked for its progress
// through that revision (kgate.progressreq.<range>) at once, so the event
// waits an etcd round trip, not the range's idle progress.
//
// A watcher that falls behind is not allowed to hold back the feed: when its
// queue overflows it is detached, catches up from the window on its own and
// attaches again; only when the window no longer reaches back far enough is
// it ended with 410 Expired, from which a client resumes with a relist.
package watchhub
