// Command kgate-etcdgrowth writes Events at a steady rate through an API
// server, as kubelets and controllers do (each Event created, then its
// count bumped a few times), and prints etcd's size and revision every
// --sample: the figure that shows whether history compaction and the
// event TTL keep etcd bounded under a server left running. See
// bench/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "kgate-etcdgrowth:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kgate-etcdgrowth", flag.ContinueOnError)
	var (
		kubeconfig = fs.String("kubeconfig", "", "kubeconfig of the API server")
		endpoint   = fs.String("etcd", "", "etcd client URL to read the size from")
		cert       = fs.String("etcd-certfile", "", "etcd client certificate")
		key        = fs.String("etcd-keyfile", "", "etcd client key")
		ca         = fs.String("etcd-cafile", "", "etcd CA")
		rate       = fs.Float64("rate", 20, "event writes per second")
		updates    = fs.Int("updates", 4, "count bumps of each event after its creation")
		duration   = fs.Duration("duration", 2*time.Hour, "how long to run")
		sample     = fs.Duration("sample", time.Minute, "how often to print etcd's size")
		namespace  = fs.String("namespace", "default", "namespace of the events")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" || *endpoint == "" || *rate <= 0 || *updates < 0 {
		return errors.New("--kubeconfig and --etcd are required; --rate must be positive")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("cannot load the kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(*rate)*2, int(*rate)*2
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("cannot build the client: %w", err)
	}
	ecfg := clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second}
	if *cert != "" {
		tlsInfo := transport.TLSInfo{CertFile: *cert, KeyFile: *key, TrustedCAFile: *ca}
		if ecfg.TLS, err = tlsInfo.ClientConfig(); err != nil {
			return fmt.Errorf("cannot load the etcd credentials: %w", err)
		}
	}
	etcd, err := clientv3.New(ecfg)
	if err != nil {
		return fmt.Errorf("cannot connect to etcd: %w", err)
	}
	defer etcd.Close()

	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	start := time.Now()
	fmt.Println("elapsed\twrites\tevents_in_etcd\trevision\tdb_size_bytes\tdb_in_use_bytes")
	report := func(writes int) error {
		st, err := etcd.Status(ctx, *endpoint)
		if err != nil {
			return fmt.Errorf("cannot read etcd's status: %w", err)
		}
		n, err := etcd.Get(ctx, "/registry/events/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("cannot count events: %w", err)
		}
		fmt.Printf("%s\t%d\t%d\t%d\t%d\t%d\n", time.Since(start).Round(time.Second), writes, n.Count, st.Header.Revision, st.DbSize, st.DbSizeInUse)
		return nil
	}
	events := client.CoreV1().Events(*namespace)
	tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
	defer tick.Stop()
	next := time.Now().Add(*sample)
	var (
		writes int
		cur    *corev1.Event
	)
	if err := report(0); err != nil {
		return err
	}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return report(writes)
			}
			return ctx.Err()
		case <-tick.C:
		}
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		if cur == nil || int(cur.Count) > *updates {
			now := metav1.Now()
			cur, err = events.Create(wctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{GenerateName: "growth-"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: *namespace, Name: fmt.Sprintf("pod-%d", i%1000)},
				Reason:         "Pulled", Message: "Container image already present on machine",
				Type: corev1.EventTypeNormal, Count: 1, FirstTimestamp: now, LastTimestamp: now,
				Source: corev1.EventSource{Component: "kubelet", Host: "node-1"},
			}, metav1.CreateOptions{})
		} else {
			cur.Count++
			cur.LastTimestamp = metav1.Now()
			cur, err = events.Update(wctx, cur, metav1.UpdateOptions{})
		}
		wcancel()
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return fmt.Errorf("cannot write an event: %w", err)
		}
		writes++
		if time.Now().After(next) {
			next = next.Add(*sample)
			if err := report(writes); err != nil {
				return err
			}
		}
	}
}
