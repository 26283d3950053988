package apf

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/authentication/user"
	flowcontrolapplyv1 "k8s.io/client-go/applyconfigurations/flowcontrol/v1"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"

	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/storage/storagetest"
)

// appliedStatus records the status the controller applies (the store
// behind it is exercised by deploy/devcluster's TestFairQueuing).
type appliedStatus struct {
	flowcontrolclient.FlowcontrolV1Interface
	flowcontrolclient.FlowSchemaInterface
	mu      sync.Mutex
	applied map[string]string // FlowSchema → its Dangling status
}

func (a *appliedStatus) FlowSchemas() flowcontrolclient.FlowSchemaInterface { return a }

func (a *appliedStatus) ApplyStatus(_ context.Context, fs *flowcontrolapplyv1.FlowSchemaApplyConfiguration, _ metav1.ApplyOptions) (*flowcontrolv1.FlowSchema, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range fs.Status.Conditions {
		a.applied[*fs.Name] = string(*c.Status)
	}
	return nil, nil
}

func (a *appliedStatus) dangling(name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied[name]
}

type noSource struct{}

func (noSource) Start()       {}
func (noSource) Close() error { return nil }

// bootstrapObjects are kube-apiserver's mandatory and suggested
// configuration, with UIDs as stored objects have.
func bootstrapObjects() (plcs, fss []runtime.Object, uids map[string]types.UID) {
	uids = map[string]types.UID{}
	for _, p := range append(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations...) {
		p = p.DeepCopy()
		p.UID, p.ResourceVersion = types.UID("plc-"+p.Name), "1"
		uids["plc/"+p.Name] = p.UID
		plcs = append(plcs, p)
	}
	for _, f := range append(bootstrap.MandatoryFlowSchemas, bootstrap.SuggestedFlowSchemas...) {
		f = f.DeepCopy()
		f.UID, f.ResourceVersion = types.UID("fs-"+f.Name), "1"
		uids["fs/"+f.Name] = f.UID
		fss = append(fss, f)
	}
	return plcs, fss, uids
}

func startController(t testing.TB, objects ...runtime.Object) (*Controller, *appliedStatus, map[string]types.UID) {
	t.Helper()
	status := &appliedStatus{applied: map[string]string{}}
	c, sinks, err := newController(Config{ConcurrencyLimit: 600}, storagetest.Logger(t), status)
	if err != nil {
		t.Fatal(err)
	}
	c.feed = noSource{}
	plcs, fss, uids := bootstrapObjects()
	for _, o := range objects {
		switch o := o.(type) {
		case *flowcontrolv1.FlowSchema:
			fss = append(fss, o)
		case *flowcontrolv1.PriorityLevelConfiguration:
			plcs = append(plcs, o)
		}
	}
	sinks[plcGVR].Replace(plcs)
	sinks[fsGVR].Replace(fss)
	c.Start()
	t.Cleanup(c.Close)
	return c, status, uids
}

func resourceRequest(verb, ns, resource string) *requestinfo.Info {
	return &requestinfo.Info{IsResourceRequest: true, Verb: verb, APIPrefix: "api", APIVersion: "v1", Namespace: ns, Resource: resource, Path: "/api/v1/" + resource}
}

// TestClassification: kube-apiserver's bootstrap configuration, run by
// upstream's controller, classifies kgate's requests as kube-apiserver
// classifies them, and the decision carries the objects' UIDs.
func TestClassification(t *testing.T) {
	c, _, uids := startController(t)
	leases := resourceRequest("update", "kube-system", "leases")
	leases.APIGroup, leases.APIPrefix = "coordination.k8s.io", "apis"
	cases := []struct {
		name         string
		user         user.Info
		info         *requestinfo.Info
		schema, want string
	}{
		{"cluster admin", &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}, resourceRequest("get", "default", "pods"), "exempt", "exempt"},
		{"kubelet", &user.DefaultInfo{Name: "system:node:n1", Groups: []string{user.NodesGroup, user.AllAuthenticated}}, resourceRequest("get", "default", "pods"), "system-nodes", "system"},
		{"scheduler", &user.DefaultInfo{Name: user.KubeScheduler, Groups: []string{user.AllAuthenticated}}, resourceRequest("list", "", "pods"), "kube-scheduler", "workload-high"},
		{"leader election", &user.DefaultInfo{Name: user.KubeControllerManager, Groups: []string{user.AllAuthenticated}}, leases, "system-leader-election", "leader-election"},
		{"service account", &user.DefaultInfo{Name: "system:serviceaccount:apps:builder", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:apps", user.AllAuthenticated}}, resourceRequest("get", "apps", "configmaps"), "service-accounts", "workload-low"},
		{"user", &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}, resourceRequest("get", "default", "configmaps"), "global-default", "global-default"},
		{"anonymous", &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}, resourceRequest("get", "default", "configmaps"), "global-default", "global-default"},
		{"no group", &user.DefaultInfo{Name: "nobody"}, resourceRequest("get", "default", "configmaps"), "catch-all", "catch-all"},
		{"probe", &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}, &requestinfo.Info{Verb: "get", Path: "/readyz"}, "probes", "exempt"},
	}
	// The controller digests the objects in its own goroutine.
	storagetest.Eventually(t, 10*time.Second, "the suggested configuration in force", func() error {
		d := c.Handle(context.Background(), Request{Info: cases[2].info, User: cases[2].user}, func() {})
		if d.PriorityLevel != "workload-high" {
			return fmt.Errorf("scheduler at %q", d.PriorityLevel)
		}
		return nil
	})
	for _, tc := range cases {
		ran := false
		d := c.Handle(context.Background(), Request{Info: tc.info, User: tc.user}, func() { ran = true })
		if !ran || !d.Executed {
			t.Errorf("%s: not executed", tc.name)
		}
		if d.PriorityLevel != tc.want || d.FlowSchemaUID != uids["fs/"+tc.schema] || d.PriorityLevelUID != uids["plc/"+tc.want] {
			t.Errorf("%s: level %q (%s), schema %s; want %q (%s), schema %s", tc.name, d.PriorityLevel, d.PriorityLevelUID, d.FlowSchemaUID, tc.want, uids["plc/"+tc.want], uids["fs/"+tc.schema])
		}
	}
}

// TestRejectAndDangling: a level that rejects beyond its seat rejects a
// request that finds it taken, with a Retry-After; a FlowSchema naming
// no level gets Dangling=True applied, the others False.
func TestRejectAndDangling(t *testing.T) {
	zero := int32(0)
	one := int32(1)
	plc := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "narrow", UID: "plc-narrow", ResourceVersion: "1"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: &one, LendablePercent: &zero, BorrowingLimitPercent: &zero,
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
		}},
	}
	schema := func(name, level string, precedence int32) *flowcontrolv1.FlowSchema {
		return &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("fs-" + name), ResourceVersion: "1"},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
				MatchingPrecedence:         precedence,
				Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
					Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "bob"}}},
					ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}}},
				}},
			},
		}
	}
	c, status, _ := startController(t, plc, schema("narrow", "narrow", 100), schema("lost", "no-such-level", 200))
	bob := &user.DefaultInfo{Name: "bob", Groups: []string{user.AllAuthenticated}}
	get := resourceRequest("get", "default", "configmaps")
	storagetest.Eventually(t, 10*time.Second, "bob classified", func() error {
		if d := c.Handle(context.Background(), Request{Info: get, User: bob}, func() {}); d.PriorityLevel != "narrow" {
			return fmt.Errorf("bob at %q", d.PriorityLevel)
		}
		return nil
	})
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan Decision)
	go func() {
		done <- c.Handle(context.Background(), Request{Info: get, User: bob}, func() { close(holding); <-release })
	}()
	<-holding
	// ceil(600 × 1 / all the shares) is 3 seats: fill the other two.
	var others sync.WaitGroup
	var seated sync.WaitGroup
	for range 2 {
		seated.Add(1)
		others.Go(func() {
			c.Handle(context.Background(), Request{Info: get, User: bob}, func() { seated.Done(); <-release })
		})
	}
	seated.Wait()
	d := c.Handle(context.Background(), Request{Info: get, User: bob}, func() { t.Error("ran over the level's seats") })
	if d.Executed || d.RetryAfter < 1 || d.PriorityLevel != "narrow" {
		t.Fatalf("over the seats: %+v, want rejected with a Retry-After", d)
	}
	close(release)
	others.Wait()
	if first := <-done; !first.Executed {
		t.Fatalf("the first request: %+v", first)
	}
	storagetest.Eventually(t, 10*time.Second, "the Dangling conditions", func() error {
		if got := status.dangling("lost"); got != "True" {
			return fmt.Errorf("lost: Dangling %q", got)
		}
		if got := status.dangling("narrow"); got != "False" {
			return fmt.Errorf("narrow: Dangling %q", got)
		}
		return nil
	})
}

// BenchmarkHandle is a request classified (bootstrap configuration,
// global-default) and seated at once: the cost of API Priority and
// Fairness on the request path.
func BenchmarkHandle(b *testing.B) {
	c, _, _ := startController(b)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	get := resourceRequest("get", "default", "configmaps")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	storagetest.Eventually(b, 10*time.Second, "the suggested configuration in force", func() error {
		if d := c.Handle(ctx, Request{Info: get, User: alice}, func() {}); d.PriorityLevel != "global-default" {
			return fmt.Errorf("alice at %q", d.PriorityLevel)
		}
		return nil
	})
	b.ReportAllocs()
	for b.Loop() {
		if d := c.Handle(ctx, Request{Info: get, User: alice}, func() {}); !d.Executed {
			b.Fatal(errors.New("rejected"))
		}
	}
}
