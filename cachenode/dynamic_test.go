package cachenode_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/cachenode"
	"github.com/kgate/kgate/cachenode/cachenodetest"
	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/storagetest"
)

// TestFollowsTable: a node reflects the range of a resource added at run
// time and stops and forgets it once the resource is removed, leaving the
// other ranges running.
func TestFollowsTable(t *testing.T) {
	storagetest.CheckGoroutines(t)
	reg, cm := storagetest.RegistryWithout(t, "configmaps")
	table, err := ranges.Follow(reg, ranges.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := cachenodetest.Start(t, func(cfg *cachenode.Config) {
		cfg.Registry, cfg.Ranges = reg, table
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	readyRanges := func() []string {
		var ids []string
		for _, st := range e.Node.Status() {
			if st.Ready {
				ids = append(ids, st.ID)
			}
		}
		return ids
	}
	before := readyRanges()
	if slices.Contains(before, "configmaps") || !slices.Contains(before, "pods") {
		t.Fatalf("ranges before Add: %v", before)
	}

	b, err := e.Codec.EncodeJSON(&corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	const key = "/registry/configmaps/default/x"
	resp, err := e.Etcd.Put(ctx, key, string(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(cm); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, func() error {
		if !slices.Contains(readyRanges(), "configmaps") {
			return fmt.Errorf("configmaps not reflected: %v", readyRanges())
		}
		return nil
	})
	obj, err := e.Client.Get(ctx, "configmaps", key, client.Read{ResourceVersion: resp.Header.Revision, Match: string(metav1.ResourceVersionMatchNotOlderThan)}, client.JSON)
	if err != nil {
		t.Fatalf("get from the new range: %v", err)
	}
	if obj.Revision != resp.Header.Revision {
		t.Errorf("got revision %d, want %d", obj.Revision, resp.Header.Revision)
	}

	if err := reg.Remove(cm.GVR()); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, func() error {
		for _, st := range e.Node.Status() {
			if st.ID == "configmaps" {
				return fmt.Errorf("configmaps still reflected")
			}
		}
		return nil
	})
	if _, err := e.Client.Get(ctx, "configmaps", key, client.Read{}, client.JSON); err == nil {
		t.Error("the removed range still answers")
	}
	if after := readyRanges(); !slices.Equal(after, before) {
		t.Errorf("ranges after Remove %v, want %v", after, before)
	}
}

// waitFor checks cond until it holds, failing the test when ctx ends.
func waitFor(ctx context.Context, t *testing.T, cond func() error) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%v (%v)", err, ctx.Err())
		case <-tick.C:
		}
	}
}
