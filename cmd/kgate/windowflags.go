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
	fs.Int64Var(&w.MaxBytes, "window-max-bytes", 0, "bytes kept alive by a range's window alone (superseded and deleted versions) (0: 256 MiB)")
	fs.DurationVar(&w.MaxAge, "window-max-age", 0, "age of the oldest event kept (0: 5m)")
	fs.Float64Var(&w.NodeShare, "window-node-share", 0, "the windows of a cache node together keep alive at most this share of the bytes its stores hold, within the min and max below; past it the oldest events go first (0: 0.1)")
	fs.Int64Var(&w.NodeMinBytes, "window-node-min-bytes", 0, "bytes the windows of a cache node may keep however small its stores (0: 64 MiB; = max: a fixed bound)")
	fs.Int64Var(&w.NodeMaxBytes, "window-node-max-bytes", 0, "bytes the windows of a cache node keep at most however large its stores (0: 1 GiB)")
	return w
}
