package main

import (
	"flag"
	"time"

	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/compact"
	"github.com/kgate/kgate/storage/portalloc"
)

// upkeepFlags are kube-apiserver's flags for keeping etcd small, and
// the node port range the storage stack allocates from.
type upkeepFlags struct {
	compaction *time.Duration
	eventTTL   *time.Duration
	nodePorts  *string
}

func addUpkeepFlags(fs *flag.FlagSet) upkeepFlags {
	return upkeepFlags{
		compaction: fs.Duration("etcd-compaction-interval", compact.DefaultInterval, "how often etcd's history is compacted, once per cluster whichever gateway does it (0: never)"),
		eventTTL:   fs.Duration("event-ttl", time.Hour, "how long events are kept after their last write (0: until deleted)"),
		nodePorts:  fs.String("service-node-port-range", portalloc.DefaultRange, "port range Service node ports are allocated from (NodePort and LoadBalancer Services)"),
	}
}

// backend applies the flags to the storage stack's configuration.
func (u upkeepFlags) backend(c *backend.Config) {
	c.CompactionInterval, c.EventTTL, c.NodePortRange = *u.compaction, *u.eventTTL, *u.nodePorts
}
