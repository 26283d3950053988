// Command etcd is the upstream etcd server, built from its Go module at the
// version kgate is tested with (pinned in this folder's go.mod), for
// `make cluster`: it does what etcd's own main does.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
