// Command kgate runs the roles of kgate: `kgate dev` (everything in one
// process), `kgate gateway` and `kgate cachenode` (the production roles,
// against an external etcd and NATS), and `kgate version`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "dev":
		err = runDev(ctx, os.Args[2:])
	case "gateway":
		err = runGateway(ctx, os.Args[2:])
	case "cachenode":
		err = runCachenode(ctx, os.Args[2:])
	case "pki":
		err = runPKI(os.Args[2:])
	case "status":
		err = runStatus(os.Args[2:])
	case "version":
		fmt.Println("kgate", version)
	case "help", "-h", "--help":
		usage(os.Stdout)
	default:
		fmt.Fprintf(os.Stderr, "kgate: unknown command %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kgate:", err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: kgate <command> [flags]

Commands:
  dev        all of kgate in one process: embedded etcd and NATS, a cache node, a gateway
  gateway    the API gateway, against external etcd, NATS and cache nodes
  cachenode  a cache node, against external etcd and NATS
  pki        write a CA, serving and admin certificates and a kubeconfig
  status     show members, ranges, owners, readiness and lag (asks a gateway)
  version    print kgate's version

Run 'kgate <command> -h' for the flags of a command.
`)
}
