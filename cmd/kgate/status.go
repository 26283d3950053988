package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kgate/kgate/gateway"
)

// runStatus prints the cluster as a gateway sees it: members, ranges,
// their owners and ready replicas with their lag behind etcd.
func runStatus(args []string) error {
	fs := flag.NewFlagSet("kgate status", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of a cluster admin (default: $KUBECONFIG, ~/.kube/config)")
	server := fs.String("server", "", "gateway URL, overriding the kubeconfig's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{ClusterInfo: clientcmdapiCluster(*server)}).ClientConfig()
	if err != nil {
		return fmt.Errorf("cannot load kubeconfig: %w", err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("cannot make client: %w", err)
	}
	hc.Timeout = 15 * time.Second
	resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + gateway.StatusPath)
	if err != nil {
		return fmt.Errorf("cannot reach the gateway: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("cannot read status: %w", err)
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("gateway answered %s: %s", resp.Status, body)
	}
	var st gateway.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("cannot decode status: %w", err)
	}
	printStatus(os.Stdout, &st)
	return nil
}

func printStatus(out io.Writer, st *gateway.Status) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "etcd revision %d\n\nMEMBER\tROLE\tGOSSIP\tREAD API\tSINCE\n", st.Revision)
	for _, m := range st.Members {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.Name, m.Role, m.Addr, dash(m.ReadAddr), m.Since)
	}
	fmt.Fprintf(w, "\nRANGE\tOWNERS\tREADY REPLICAS (* primary, lag in revisions)\n")
	for _, r := range st.Ranges {
		var reps []string
		for _, rep := range r.Replicas {
			mark := ""
			if rep.Primary {
				mark = "*"
			}
			reps = append(reps, fmt.Sprintf("%s%s(%d)", rep.Node, mark, rep.Lag))
		}
		if len(reps) == 0 {
			reps = []string{"NONE"}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", r.ID, dash(strings.Join(r.Owners, ",")), strings.Join(reps, " "))
	}
	w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clientcmdapiCluster(server string) clientcmdapi.Cluster {
	return clientcmdapi.Cluster{Server: server}
}
