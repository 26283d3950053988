package rbacfeed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/cachenode/cachenodetest"
	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/watchhub"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/revision"
	"github.com/kgate/kgate/storage/storagetest"
)

var alice = &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}

func listPods(ns string) authz.Attributes {
	return authz.Attributes{User: alice, Verb: "list", Namespace: ns, Resource: "pods", IsResourceRequest: true}
}

func allowed(r *authz.RBAC, a authz.Attributes) bool {
	d, _ := r.Authorize(a)
	return d == authz.Allow
}

// TestFeedFollowsCache: roles and bindings written to etcd before and
// after the feed starts reach the authorizer through a real cache node
// and watch hub; deletes too.
func TestFeedFollowsCache(t *testing.T) {
	env := cachenodetest.Start(t)
	log := storagetest.Logger(t)
	store, err := storage.New(storage.Config{Client: env.Etcd, Registry: env.Registry, Codec: env.Codec, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	oracle, err := revision.New(revision.Config{KV: env.Etcd, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { oracle.Close() })
	hub, err := watchhub.New(watchhub.Config{NATS: env.NATS, Source: env.Client, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hub.Close() })
	ctx := context.Background()
	put := func(resource string, obj runtime.Object) {
		t.Helper()
		res, _ := env.Registry.Lookup(rbacv1.SchemeGroupVersion.WithResource(resource))
		if _, err := store.Create(ctx, res, obj); err != nil {
			t.Fatal(err)
		}
	}
	del := func(resource, ns, name string) {
		t.Helper()
		res, _ := env.Registry.Lookup(rbacv1.SchemeGroupVersion.WithResource(resource))
		if _, _, err := store.Delete(ctx, res, ns, name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
			return cur, storage.DeleteRemove, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	podReader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	put("clusterroles", podReader)
	put("rolebindings", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "alice"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}})

	r := authz.NewRBAC()
	feed, err := New(Config{Registry: env.Registry, Ranges: env.Ranges, Cache: env.Client, Hub: hub, Revisions: oracle,
		Codec: env.Codec, RBAC: r, Logger: log, Backoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if feed.Ready(ctx) == nil {
		t.Fatal("ready before start")
	}
	feed.Start()
	t.Cleanup(func() { feed.Close() })
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := feed.WaitSynced(wctx); err != nil {
		t.Fatal(err)
	}
	if err := feed.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	// Synced means listed: what existed before is there at once.
	if !allowed(r, listPods("a")) || allowed(r, listPods("b")) {
		t.Fatal("listed binding not in force")
	}
	put("clusterrolebindings", &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-everywhere"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}})
	storagetest.Eventually(t, 10*time.Second, "a new ClusterRoleBinding applies", storagetest.Holds(func() bool { return allowed(r, listPods("b")) }))
	put("roles", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "secrets"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}})
	put("rolebindings", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "alice-secrets"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "secrets"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: user.AllAuthenticated}}})
	getSecret := authz.Attributes{User: alice, Verb: "get", Namespace: "a", Resource: "secrets", Name: "s", IsResourceRequest: true}
	storagetest.Eventually(t, 10*time.Second, "a new Role and RoleBinding apply", storagetest.Holds(func() bool { return allowed(r, getSecret) }))
	del("clusterrolebindings", "", "alice-everywhere")
	storagetest.Eventually(t, 10*time.Second, "a deleted ClusterRoleBinding stops applying", storagetest.Holds(func() bool { return !allowed(r, listPods("b")) }))
	del("roles", "a", "secrets")
	storagetest.Eventually(t, 10*time.Second, "a deleted Role stops applying", storagetest.Holds(func() bool { return !allowed(r, getSecret) }))
	if !allowed(r, listPods("a")) {
		t.Error("untouched binding lost")
	}
	if err := feed.Close(); err != nil {
		t.Fatal(err)
	}
}

// fakeCache serves lists of ClusterRoles from a slice; other kinds are
// empty.
type fakeCache struct {
	mu    sync.Mutex
	items map[string][][]byte // range id → items
	rev   int64
	lists int
}

func (c *fakeCache) List(_ context.Context, rangeID string, o client.ListOptions) (*client.List, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists++
	return &client.List{Revision: c.rev, Items: c.items[rangeID]}, nil
}

type fakeRevisions struct{}

func (fakeRevisions) Current(context.Context) (int64, error) { return 1, nil }

// fakeHub hands each watch the next scripted stream.
type fakeHub struct {
	mu      sync.Mutex
	streams map[string][]*fakeStream // first range id → streams, in order
	since   map[string][]int64
}

func (h *fakeHub) WatchRanges(ids []string, since int64, _ watchhub.Filter) (watchhub.Stream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.since[ids[0]] = append(h.since[ids[0]], since)
	if s := h.streams[ids[0]]; len(s) > 0 {
		h.streams[ids[0]] = s[1:]
		return s[0], nil
	}
	return &fakeStream{}, nil // blocks until the feed closes
}

type fakeStream struct {
	deliveries []watchhub.Delivery
	end        error
}

func (s *fakeStream) Next(ctx context.Context) (watchhub.Delivery, error) {
	if len(s.deliveries) > 0 {
		d := s.deliveries[0]
		s.deliveries = s.deliveries[1:]
		return d, nil
	}
	if s.end != nil {
		return watchhub.Delivery{}, s.end
	}
	<-ctx.Done()
	return watchhub.Delivery{}, ctx.Err()
}
func (s *fakeStream) Ready() (watchhub.Delivery, bool) { return watchhub.Delivery{}, false }
func (s *fakeStream) Last() int64                      { return 0 }
func (s *fakeStream) Close()                           {}

// TestFeedRelistsOn410: a watch that falls out of the window (410) makes
// the feed list again and replace what it holds; another watch error
// makes it watch again from the last revision it applied.
func TestFeedRelistsOn410(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	table, err := ranges.Default(reg)
	if err != nil {
		t.Fatal(err)
	}
	cdc := codec.New(reg.Scheme())
	res, _ := reg.Lookup(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	rng := table.Intersecting(res.ListPrefix(""))[0].ID
	role := func(name, verb string) []byte {
		b, err := cdc.EncodeJSON(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{"pods"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ev := func(rev int64, data []byte) watchhub.Delivery {
		sh := &watchhub.Shared{Event: event.Event{Type: event.Modified, Revision: rev, Object: data}}
		return watchhub.Delivery{Type: watchhub.Modified, Rev: rev, Event: sh}
	}
	cache := &fakeCache{items: map[string][][]byte{rng: {role("r", "get")}}, rev: 10}
	hub := &fakeHub{since: map[string][]int64{}, streams: map[string][]*fakeStream{rng: {
		{deliveries: []watchhub.Delivery{ev(11, role("r", "list"))}, end: errors.New("cache node gone")},
		{end: fmt.Errorf("window: %w", storage.ErrCompacted)},
	}}}
	r := authz.NewRBAC()
	feed, err := New(Config{Registry: reg, Ranges: table, Cache: cache, Hub: hub, Revisions: fakeRevisions{}, Codec: cdc,
		RBAC: r, Logger: storagetest.Logger(t), Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cache.mu.Lock()
	cache.items[rng] = [][]byte{role("r", "get")}
	cache.mu.Unlock()
	feed.Start()
	defer feed.Close()
	storagetest.Eventually(t, 10*time.Second, "the relist", storagetest.Holds(func() bool { return feed.Relists() == 1 }))
	rules, ok := r.ClusterRoleRules("r")
	if !ok || len(rules) != 1 {
		t.Fatalf("after relist: %v %v", rules, ok)
	}
	hub.mu.Lock()
	defer hub.mu.Unlock()
	// list at 10 → watch from 10 → applied 11, error → watch from 11 →
	// 410 → list at 10 → watch from 10.
	if got := hub.since[rng]; len(got) < 3 || got[0] != 10 || got[1] != 11 || got[2] != 10 {
		t.Errorf("watched from %v, want [10 11 10 ...]", got)
	}
}
