package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/kgate/kgate/deploy/pki"
)

// runPKI writes (or refreshes) a CA, a serving certificate, an admin
// client certificate and a kubeconfig, as kgate dev does, for clusters run
// as separate processes.
func runPKI(args []string) error {
	fs := flag.NewFlagSet("kgate pki", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory for the certificates and the kubeconfig; required")
	server := fs.String("server", "https://127.0.0.1:6443", "the URL the kubeconfig names")
	hosts := fs.String("hosts", "127.0.0.1,::1,localhost", "IP addresses and DNS names of the serving certificate, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("--dir is required")
	}
	b, err := pki.Ensure(pki.Config{Dir: *dir, Hosts: strings.Split(*hosts, ","), ServerURL: *server})
	if err != nil {
		return err
	}
	fmt.Printf("ca:          %s\nserving:     %s %s\nkubeconfig:  %s\n", b.CAFile, b.ServingCertFile, b.ServingKeyFile, b.KubeconfigFile)
	return nil
}
