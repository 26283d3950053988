package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kc := flag.String("kubeconfig", "", "")
	dur := flag.Duration("d", 8*time.Minute, "")
	rate := flag.Int("rate", 50, "events/s")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kc)
	if err != nil {
		panic(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	var n, cmn atomic.Int64
	payload := strings.Repeat("x", 1024)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "growth", Namespace: "default"}, Data: map[string]string{"v": payload}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		fmt.Println("cm:", err)
	}
	for w := 0; w < 4; w++ {
		go func(w int) {
			t := time.NewTicker(time.Second * 4 / time.Duration(*rate))
			defer t.Stop()
			for i := 0; ctx.Err() == nil; i++ {
				<-t.C
				ev := &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("growth-%d-%d", w, i), Namespace: "default"},
					InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "default", Name: "growth"},
					Reason:         "Growth", Message: payload[:200], Type: "Normal", Count: 1,
					FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "growth"},
				}
				if _, err := cs.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err == nil {
					n.Add(1)
				}
				if w == 0 {
					c, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "growth", metav1.GetOptions{})
					if err == nil {
						c.Data["n"] = fmt.Sprint(i)
						if _, err := cs.CoreV1().ConfigMaps("default").Update(ctx, c, metav1.UpdateOptions{}); err == nil {
							cmn.Add(1)
						}
					}
				}
			}
		}(w)
	}
	start := time.Now()
	fmt.Println("elapsed_s events_written cm_updates events_live storage_size_bytes")
	for {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		size := "?"
		if err == nil {
			sc := bufio.NewScanner(bytes.NewReader(raw))
			sc.Buffer(make([]byte, 1<<20), 1<<22)
			for sc.Scan() {
				if l := sc.Text(); strings.HasPrefix(l, "apiserver_storage_size_bytes{") {
					size = l[strings.LastIndex(l, " ")+1:]
				}
			}
		}
		live := "?"
		if l, err := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{}); err == nil {
			live = fmt.Sprint(len(l.Items))
		}
		fmt.Printf("%4.0f %d %d %s %s\n", time.Since(start).Seconds(), n.Load(), cmn.Load(), live, size)
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
	}
}
