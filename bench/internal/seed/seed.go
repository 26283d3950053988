// Package seed writes the harness's data sets through the API: namespaces
// (with the default ServiceAccount a bare kube-apiserver needs for Pods),
// realistic Pods with their status written by UpdateStatus as a kubelet
// would, and ConfigMaps — with bounded concurrency, retries of transient
// errors and a progress bar.
package seed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/kgate/kgate/bench/internal/load"
	"github.com/kgate/kgate/bench/internal/objects"
	"github.com/kgate/kgate/bench/internal/progress"
	"github.com/kgate/kgate/bench/internal/stats"
)

// Layout names the objects of a data set: pod i lives in namespace
// i mod Namespaces.
type Layout struct {
	// Prefix starts every namespace and object name (e.g. "kgate-bench").
	Prefix string
	// Set distinguishes data sets ("seed", "mem"); it is part of the
	// namespace names and the objects' LabelSet.
	Set            string
	Namespaces     int
	Pods           int
	ConfigMaps     int
	ConfigMapBytes int
}

// Namespace is the name of namespace k.
func (l Layout) Namespace(k int) string { return fmt.Sprintf("%s-%s-%d", l.Prefix, l.Set, k) }

// AllNamespaces lists the layout's namespaces.
func (l Layout) AllNamespaces() []string {
	out := make([]string, l.Namespaces)
	for k := range out {
		out[k] = l.Namespace(k)
	}
	return out
}

// Pod is the namespace and name of pod i.
func (l Layout) Pod(i int) (namespace, name string) {
	return l.Namespace(i % max(l.Namespaces, 1)), fmt.Sprintf("pod-%06d", i)
}

// ConfigMap is the namespace and name of ConfigMap i.
func (l Layout) ConfigMap(i int) (namespace, name string) {
	return l.Namespace(i % max(l.Namespaces, 1)), fmt.Sprintf("cm-%06d", i)
}

// PodsIn is how many of the layout's pods namespace k holds.
func (l Layout) PodsIn(k int) int {
	n := l.Pods / l.Namespaces
	if k < l.Pods%l.Namespaces {
		n++
	}
	return n
}

// Config is a seeding run.
type Config struct {
	// Client writes (protobuf, like controllers).
	Client kubernetes.Interface
	Layout Layout
	// Concurrency bounds requests in flight (default 16).
	Concurrency int
	// Progress receives the progress bar (nil: none).
	Progress io.Writer
	// Written, when set, counts objects written as they are (for
	// sampling while seeding).
	Written *atomic.Int64
}

// Summary is what a seeding run did.
type Summary struct {
	Created, Existing, Failed int
	// PodJSONBytes is the mean JSON size of the pods written (as the
	// server returned them, with status), zero for ConfigMaps.
	PodJSONBytes float64
	// JSONBytes is the total JSON size of the objects written.
	JSONBytes int64
	// Latency is of each object's writes (create, and for pods the status
	// update), retries included.
	Latency *stats.Histogram
	Errors  map[string]int64
	Took    time.Duration
	// FirstError is the first failure, for the log.
	FirstError error
}

// Namespaces creates the layout's namespaces and their default
// ServiceAccount; existing ones are fine.
func Namespaces(ctx context.Context, c kubernetes.Interface, names []string) error {
	for _, ns := range names {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{objects.LabelBench: "true"},
		}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cannot create namespace %s: %w", ns, err)
		}
		// kube-apiserver's ServiceAccount admission rejects Pods until
		// the controller manager made "default"; without one, make it.
		err = retry(ctx, func() error {
			_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
			return err
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cannot create the default ServiceAccount of %s: %w", ns, err)
		}
	}
	return nil
}

// Pods writes pods [from, to) of the layout: create, then the status.
func Pods(ctx context.Context, cfg Config, from, to int) (*Summary, error) {
	label := fmt.Sprintf("seeding %s pods", cfg.Layout.Set)
	var pods atomic.Int64
	s, err := each(ctx, cfg, label, from, to, func(ctx context.Context, i int) (int, error) {
		ns, name := cfg.Layout.Pod(i)
		p := objects.Pod(ns, name, cfg.Layout.Set, i)
		var created *corev1.Pod
		err := retry(ctx, func() (err error) {
			created, err = cfg.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return 0, err
		}
		objects.SetRunningStatus(created, i)
		var updated *corev1.Pod
		err = retry(ctx, func() (err error) {
			updated, err = cfg.Client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("cannot write the status of %s/%s: %w", ns, name, err)
		}
		pods.Add(1)
		return JSONSize(updated, "v1", "Pod"), nil
	})
	if s != nil && pods.Load() > 0 {
		s.PodJSONBytes = float64(s.JSONBytes) / float64(pods.Load())
	}
	return s, err
}

// ConfigMaps writes the layout's ConfigMaps.
func ConfigMaps(ctx context.Context, cfg Config) (*Summary, error) {
	label := fmt.Sprintf("seeding %s configmaps", cfg.Layout.Set)
	return each(ctx, cfg, label, 0, cfg.Layout.ConfigMaps, func(ctx context.Context, i int) (int, error) {
		ns, name := cfg.Layout.ConfigMap(i)
		cm := objects.ConfigMap(ns, name, cfg.Layout.Set, cfg.Layout.ConfigMapBytes)
		var created *corev1.ConfigMap
		err := retry(ctx, func() (err error) {
			created, err = cfg.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return 0, err
		}
		return JSONSize(created, "v1", "ConfigMap"), nil
	})
}

// JSONSize is the size of obj's JSON with apiVersion and kind, as a
// client would receive it.
func JSONSize(obj runtime.Object, apiVersion, kind string) int {
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	b, err := json.Marshal(obj)
	if err != nil {
		return 0
	}
	return len(b)
}

// each runs write for every index in [from, to) with cfg.Concurrency
// workers; write returns the JSON size written. Existing objects are
// counted, not rewritten.
func each(ctx context.Context, cfg Config, label string, from, to int, write func(context.Context, int) (int, error)) (*Summary, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	s := &Summary{Latency: &stats.Histogram{}, Errors: map[string]int64{}}
	if to <= from {
		return s, nil
	}
	start := time.Now()
	bar := progress.New(cfg.Progress, label, int64(to-from))
	defer bar.Close()
	next := make(chan int)
	var mu sync.Mutex // guards s
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(func() {
			for i := range next {
				t0 := time.Now()
				n, err := write(ctx, i)
				d := time.Since(t0)
				mu.Lock()
				switch {
				case err == nil:
					s.Created++
					s.JSONBytes += int64(n)
					s.Latency.Record(d)
					if cfg.Written != nil {
						cfg.Written.Add(1)
					}
				case apierrors.IsAlreadyExists(err):
					s.Existing++
				default:
					s.Failed++
					s.Errors[load.Classify(err)]++
					if s.FirstError == nil {
						s.FirstError = err
					}
				}
				mu.Unlock()
				bar.Add(1)
			}
		})
	}
feed:
	for i := from; i < to; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	s.Took = time.Since(start)
	if err := ctx.Err(); err != nil {
		return s, err
	}
	return s, nil
}

// retry runs f until it succeeds, fails for good, or 6 attempts failed on
// transient errors (429, 5xx, timeouts, network), backing off from 100ms.
func retry(ctx context.Context, f func() error) error {
	backoff := 100 * time.Millisecond
	var err error
	for attempt := 0; attempt < 6; attempt++ {
		if err = f(); err == nil || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff *= 2
	}
	return err
}

func transient(err error) bool {
	if apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code >= 500
	}
	switch load.Classify(err) {
	case "timeout", "network":
		return true
	}
	return false
}
