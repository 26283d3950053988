package main

import (
	"flag"

	"github.com/kgate/kgate/cachenode"
)

// addWindowFlags adds the bounds of the cache nodes' event windows, for
// `kgate cachenode` and `kgate dev`; zero keeps each default.
func addWindowFlags(fs *flag.FlagSet) *cachenode.WindowConfig {
	w := &cachenode.WindowConfig{}
	fs.IntVar(&w.MaxEvents, "window-max-events", 0, "events kept per range for watch catch-up (0: 100000)")
	fs.Int64Var(&w.MaxBytes, "window-max-bytes", 0, "bytes of events kept per range (0: 256 MiB)")
	fs.DurationVar(&w.MaxAge, "window-max-age", 0, "age of the oldest event kept (0: 5m)")
	fs.Int64Var(&w.NodeMaxBytes, "window-node-max-bytes", 0, "bytes of events kept by all ranges of a cache node together; past it the oldest go first (0: 1 GiB)")
	return w
}
