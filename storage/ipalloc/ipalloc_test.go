package ipalloc

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

func newAllocator(t *testing.T, client *clientv3.Client, cidr string) *Allocator {
	t.Helper()
	a, err := New(Config{Client: client, CIDR: cidr, Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatalf("cannot make allocator: %v", err)
	}
	return a
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestNew(t *testing.T) {
	if _, err := New(Config{CIDR: "10.0.0.0/24"}); err == nil {
		t.Error("New without client succeeded")
	}
	client := &clientv3.Client{}
	for _, cidr := range []string{"10.0.0.0", "10.0.0.0/31", "fd00::/48", "nonsense"} {
		if _, err := New(Config{Client: client, CIDR: cidr}); err == nil {
			t.Errorf("New with CIDR %q succeeded", cidr)
		}
	}
	a, err := New(Config{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.CIDR().String(); got != DefaultCIDR {
		t.Errorf("default CIDR = %s, want %s", got, DefaultCIDR)
	}
	if a.Family() != corev1.IPv4Protocol || a.Reserved() != "10.96.0.1" {
		t.Errorf("family, reserved = %s, %s, want IPv4, 10.96.0.1", a.Family(), a.Reserved())
	}
	a, err = New(Config{Client: client, CIDR: "fd00:10:96::/108"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Family() != corev1.IPv6Protocol || a.Reserved() != "fd00:10:96::1" {
		t.Errorf("family, reserved = %s, %s, want IPv6, fd00:10:96::1", a.Family(), a.Reserved())
	}
}

// TestAllocateConcurrent has several allocators on one etcd, as several
// gateways, exhaust a range concurrently: every address is handed out once,
// the reserved one never, and the requests beyond the range get ErrFull.
func TestAllocateConcurrent(t *testing.T) {
	storagetest.CheckGoroutines(t)
	client := storagetest.StartEtcd(t)
	ctx := testContext(t)
	const (
		cidr       = "10.10.0.0/26" // 62 addresses, the first reserved
		allocators = 4
		perWorker  = 50
	)
	var (
		mu     sync.Mutex // guards owners and full
		owners = map[string]string{}
		full   int
		wg     sync.WaitGroup
	)
	for w := range allocators {
		a := newAllocator(t, client, cidr)
		wg.Go(func() {
			for i := range perWorker {
				name := fmt.Sprintf("svc-%d-%d", w, i)
				ip, err := a.Allocate(ctx, "ns", name)
				mu.Lock()
				switch {
				case errors.Is(err, ErrFull):
					full++
				case err != nil:
					t.Errorf("Allocate(%s): %v", name, err)
				case owners[ip] != "":
					t.Errorf("%s handed out twice: to %s and %s", ip, owners[ip], name)
				default:
					owners[ip] = name
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(owners) != 61 || full != allocators*perWorker-61 {
		t.Errorf("allocated %d addresses and %d ErrFull, want 61 and %d", len(owners), full, allocators*perWorker-61)
	}
	prefix := netip.MustParsePrefix(cidr)
	for ip := range owners {
		addr := netip.MustParseAddr(ip)
		if !prefix.Contains(addr) || ip == "10.10.0.0" || ip == "10.10.0.63" || ip == "10.10.0.1" {
			t.Errorf("allocated %s: network, broadcast, reserved or outside %s", ip, cidr)
		}
	}
	stored := storedAddresses(t, client)
	if len(stored) != len(owners) {
		t.Errorf("%d IPAddress objects stored, want %d", len(stored), len(owners))
	}
	for ip, obj := range stored {
		if ref := obj.Spec.ParentRef; ref == nil || ref.Name != owners[ip] || ref.Namespace != "ns" {
			t.Errorf("IPAddress %s has parentRef %+v, want ns/%s", ip, obj.Spec.ParentRef, owners[ip])
		}
	}
}

func TestAllocateSpecific(t *testing.T) {
	storagetest.CheckGoroutines(t)
	client := storagetest.StartEtcd(t)
	ctx := testContext(t)
	a := newAllocator(t, client, "10.96.0.0/12")
	other := newAllocator(t, client, "10.96.0.0/12")

	if err := a.AllocateSpecific(ctx, "10.96.0.1", "default", "kubernetes"); err != nil {
		t.Fatalf("allocating the reserved address: %v", err)
	}
	if err := other.AllocateSpecific(ctx, "10.96.0.1", "default", "kubernetes"); err != nil {
		t.Errorf("allocating again for the same Service: %v", err)
	}
	err := other.AllocateSpecific(ctx, "10.96.0.1", "default", "impostor")
	if !errors.Is(err, ErrAllocated) || !strings.Contains(err.Error(), "services default/kubernetes") {
		t.Errorf("allocating for another Service: %v, want ErrAllocated naming the holder", err)
	}
	if err := a.AllocateSpecific(ctx, "10.100.7.8", "ns", "web"); err != nil {
		t.Errorf("allocating an address of the upper band: %v", err)
	}
	for _, ip := range []string{"10.96.0.0", "10.111.255.255", "10.112.0.1", "fd00::1", "10.96.0.300", "", "10.96.0.1%eth0"} {
		if err := a.AllocateSpecific(ctx, ip, "ns", "web"); !errors.Is(err, ErrNotInRange) {
			t.Errorf("AllocateSpecific(%q) = %v, want ErrNotInRange", ip, err)
		}
	}
	// An IPv4-mapped IPv6 address names the IPv4 address.
	if err := a.AllocateSpecific(ctx, "::ffff:10.96.0.1", "default", "impostor"); !errors.Is(err, ErrAllocated) {
		t.Errorf("AllocateSpecific(::ffff:10.96.0.1) = %v, want ErrAllocated", err)
	}
	// Dynamic allocation never hands out an address held.
	for range 20 {
		ip, err := a.Allocate(ctx, "ns", "dyn")
		if err != nil {
			t.Fatal(err)
		}
		if ip == "10.96.0.1" || ip == "10.100.7.8" {
			t.Fatalf("Allocate returned %s, which is held", ip)
		}
	}
	// What kube-apiserver or another writer stored is respected, even if
	// it does not decode.
	if _, err := client.Put(ctx, KeyPrefix+"10.96.0.5", "garbage"); err != nil {
		t.Fatal(err)
	}
	if err := a.AllocateSpecific(ctx, "10.96.0.5", "ns", "web"); !errors.Is(err, ErrAllocated) {
		t.Errorf("allocating an address with an undecodable object: %v, want ErrAllocated", err)
	}
}

func TestReleaseAndReuse(t *testing.T) {
	storagetest.CheckGoroutines(t)
	client := storagetest.StartEtcd(t)
	ctx := testContext(t)
	a := newAllocator(t, client, "192.168.0.0/29") // .1 reserved, .2-.6 dynamic

	got := map[string]bool{}
	for i := range 5 {
		ip, err := a.Allocate(ctx, "ns", fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		got[ip] = true
	}
	for _, ip := range []string{"192.168.0.2", "192.168.0.3", "192.168.0.4", "192.168.0.5", "192.168.0.6"} {
		if !got[ip] {
			t.Errorf("%s was not allocated; got %v", ip, got)
		}
	}
	if _, err := a.Allocate(ctx, "ns", "s5"); !errors.Is(err, ErrFull) {
		t.Fatalf("allocation beyond the range: %v, want ErrFull", err)
	}
	if err := a.Release(ctx, "192.168.0.4"); err != nil {
		t.Fatal(err)
	}
	ip, err := a.Allocate(ctx, "ns", "s5")
	if err != nil || ip != "192.168.0.4" {
		t.Fatalf("allocation after release = %q, %v, want 192.168.0.4", ip, err)
	}
	if err := a.AllocateSpecific(ctx, "192.168.0.4", "ns", "s6"); !errors.Is(err, ErrAllocated) {
		t.Errorf("specific allocation of a reused address: %v, want ErrAllocated", err)
	}
	// Releasing what is not allocated, or not in the range, does nothing.
	for _, ip := range []string{"192.168.0.4", "192.168.0.4", "10.0.0.1", "nonsense"} {
		if err := a.Release(ctx, ip); err != nil {
			t.Errorf("Release(%q): %v", ip, err)
		}
	}
	if err := a.AllocateSpecific(ctx, "192.168.0.4", "ns", "s6"); err != nil {
		t.Errorf("specific allocation after release: %v", err)
	}
	// The reserved address is free but only allocated on request.
	if _, err := a.Allocate(ctx, "ns", "s7"); !errors.Is(err, ErrFull) {
		t.Errorf("allocation with only the reserved address left: %v, want ErrFull", err)
	}
}

func TestStoredValue(t *testing.T) {
	storagetest.CheckGoroutines(t)
	client := storagetest.StartEtcd(t)
	ctx := testContext(t)
	a := newAllocator(t, client, "fd00:10:96::/108")
	ip, err := a.Allocate(ctx, "team", "api")
	if err != nil {
		t.Fatal(err)
	}
	if addr := netip.MustParseAddr(ip); addr.String() != ip || !a.CIDR().Contains(addr) {
		t.Errorf("allocated %s: not canonical or outside %s", ip, a.CIDR())
	}
	resp, err := client.Get(ctx, KeyPrefix+ip)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("cannot read %s%s: %v", KeyPrefix, ip, err)
	}
	value := resp.Kvs[0].Value
	if !codec.IsProtobuf(value) {
		t.Errorf("stored value %q is not protobuf, as kube-apiserver stores it", value)
	}
	obj := decodeIPAddress(t, value)
	want := networkingv1.ParentReference{Resource: "services", Namespace: "team", Name: "api"}
	switch {
	case obj.Name != ip:
		t.Errorf("name = %q, want %q", obj.Name, ip)
	case obj.Labels[networkingv1.LabelManagedBy] != "ipallocator.k8s.io" || obj.Labels[networkingv1.LabelIPAddressFamily] != "IPv6" || len(obj.Labels) != 2:
		t.Errorf("labels = %v", obj.Labels)
	case obj.Spec.ParentRef == nil || *obj.Spec.ParentRef != want:
		t.Errorf("parentRef = %+v, want %+v", obj.Spec.ParentRef, want)
	case obj.UID == "" || obj.CreationTimestamp.IsZero() || obj.ResourceVersion != "" || obj.Namespace != "":
		t.Errorf("metadata = %+v", obj.ObjectMeta)
	}
}

// storedAddresses returns the IPAddress objects in etcd by name.
func storedAddresses(t *testing.T, client *clientv3.Client) map[string]*networkingv1.IPAddress {
	t.Helper()
	resp, err := client.Get(context.Background(), KeyPrefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*networkingv1.IPAddress{}
	for _, kv := range resp.Kvs {
		obj := decodeIPAddress(t, kv.Value)
		if KeyPrefix+obj.Name != string(kv.Key) {
			t.Errorf("IPAddress %s stored at %s", obj.Name, kv.Key)
		}
		out[obj.Name] = obj
	}
	return out
}

func decodeIPAddress(t *testing.T, value []byte) *networkingv1.IPAddress {
	t.Helper()
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	obj := &networkingv1.IPAddress{}
	if err := codec.New(scheme).Decode(value, obj); err != nil {
		t.Fatalf("stored value %s: %v", value, err)
	}
	return obj
}
