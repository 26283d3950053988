package admission_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/storage/registry"
)

var pods = &registry.Resource{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}

// plugin is a fake plugin recording its calls in a shared log.
type plugin struct {
	name        string
	log         *[]string
	admitErr    error
	validateErr error
	// charge: Validate charges (records an undo) before it answers.
	charge bool
	// mutate: Admit replaces the object's labels.
	mutate bool
	warn   string
}

func (p *plugin) Admit(_ context.Context, a *admission.Attributes) error {
	*p.log = append(*p.log, p.name+".admit")
	if p.warn != "" {
		a.AddWarning(p.warn)
	}
	if p.mutate {
		pod := a.Object.(*corev1.Pod).DeepCopy()
		pod.Labels = map[string]string{"mutated-by": p.name}
		a.Object = pod
	}
	return p.admitErr
}

func (p *plugin) Validate(_ context.Context, a *admission.Attributes) error {
	*p.log = append(*p.log, p.name+".validate")
	if p.charge {
		a.OnFailure(func() { *p.log = append(*p.log, p.name+".undo") })
	}
	return p.validateErr
}

func (p *plugin) Finish(_ context.Context, a *admission.Attributes, stored runtime.Object, err error) {
	*p.log = append(*p.log, fmt.Sprintf("%s.finish(%v)", p.name, err != nil))
}

// mutatorOnly and validatorOnly expose one phase of a plugin.
type mutatorOnly struct{ p *plugin }

func (m mutatorOnly) Admit(ctx context.Context, a *admission.Attributes) error {
	return m.p.Admit(ctx, a)
}

type validatorOnly struct{ p *plugin }

func (v validatorOnly) Validate(ctx context.Context, a *admission.Attributes) error {
	return v.p.Validate(ctx, a)
}

func newAttrs(dry bool) *admission.Attributes {
	return &admission.Attributes{
		Resource: pods, Operation: admission.Create, Namespace: "ns", Name: "p", DryRun: dry,
		Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}},
	}
}

// run drives a write through the chain as the REST handler does: Admit,
// Validate, then (not on a dry run) Finish with storeErr.
func run(c admission.Chain, a *admission.Attributes, storeErr error) error {
	ctx := context.Background()
	if err := c.Admit(ctx, a); err != nil {
		return err
	}
	if err := c.Validate(ctx, a); err != nil {
		return err
	}
	if !a.DryRun {
		c.Finish(ctx, a, a.Object, storeErr)
	}
	return storeErr
}

func TestChain(t *testing.T) {
	errA, errV, errStore := errors.New("admit refused"), errors.New("validate refused"), errors.New("etcd down")
	for _, tc := range []struct {
		name     string
		plugins  func(log *[]string) admission.Chain
		dry      bool
		storeErr error
		wantErr  error
		want     []string
	}{{
		name: "mutating phase first, then validating, then finish, in order",
		plugins: func(log *[]string) admission.Chain {
			return admission.Chain{&plugin{name: "a", log: log}, mutatorOnly{&plugin{name: "m", log: log}}, validatorOnly{&plugin{name: "v", log: log}}, &plugin{name: "b", log: log}}
		},
		want: []string{"a.admit", "m.admit", "b.admit", "a.validate", "v.validate", "b.validate", "a.finish(false)", "b.finish(false)"},
	}, {
		name: "an admit error stops the chain before any validation",
		plugins: func(log *[]string) admission.Chain {
			return admission.Chain{&plugin{name: "a", log: log, admitErr: errA}, &plugin{name: "b", log: log}}
		},
		wantErr: errA,
		want:    []string{"a.admit"},
	}, {
		name: "a validate error stops the chain and undoes the charges made, last first",
		plugins: func(log *[]string) admission.Chain {
			return admission.Chain{&plugin{name: "a", log: log, charge: true}, &plugin{name: "b", log: log, charge: true}, &plugin{name: "c", log: log, validateErr: errV}, &plugin{name: "d", log: log, charge: true}}
		},
		wantErr: errV,
		want:    []string{"a.admit", "b.admit", "c.admit", "d.admit", "a.validate", "b.validate", "c.validate", "b.undo", "a.undo"},
	}, {
		name: "a failed write undoes the charges before the plugins learn of it",
		plugins: func(log *[]string) admission.Chain {
			return admission.Chain{&plugin{name: "q", log: log, charge: true}}
		},
		storeErr: errStore,
		wantErr:  errStore,
		want:     []string{"q.admit", "q.validate", "q.undo", "q.finish(true)"},
	}, {
		name: "a stored write keeps the charges",
		plugins: func(log *[]string) admission.Chain {
			return admission.Chain{&plugin{name: "q", log: log, charge: true}}
		},
		want: []string{"q.admit", "q.validate", "q.finish(false)"},
	}, {
		name: "a dry run runs both phases and nothing else",
		plugins: func(log *[]string) admission.Chain {
			return admission.Chain{&plugin{name: "q", log: log, charge: true}}
		},
		dry:  true,
		want: []string{"q.admit", "q.validate"},
	}, {
		name:    "an empty chain admits",
		plugins: func(*[]string) admission.Chain { return nil },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			err := run(tc.plugins(&log), newAttrs(tc.dry), tc.storeErr)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(log, tc.want) {
				t.Errorf("calls\n got %q\nwant %q", log, tc.want)
			}
		})
	}
}

func TestChainUndoesOnce(t *testing.T) {
	var log []string
	c := admission.Chain{&plugin{name: "q", log: &log, charge: true}}
	a := newAttrs(false)
	ctx := context.Background()
	if err := c.Validate(ctx, a); err != nil {
		t.Fatal(err)
	}
	c.Finish(ctx, a, nil, errors.New("conflict"))
	c.Finish(ctx, a, nil, errors.New("again"))
	if n := slices.Index(log, "q.undo"); n < 0 || slices.Contains(log[n+1:], "q.undo") {
		t.Errorf("undo ran other than once: %q", log)
	}
}

func TestChainMutationsAndWarnings(t *testing.T) {
	var log []string
	c := admission.Chain{
		&plugin{name: "first", log: &log, mutate: true, warn: "w1"},
		&plugin{name: "second", log: &log, mutate: true, warn: "w2"},
	}
	a := newAttrs(false)
	orig := a.Object
	if err := c.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if got := a.Object.(*corev1.Pod).Labels["mutated-by"]; got != "second" {
		t.Errorf("object mutated last by %q, want second: later mutators see earlier mutations", got)
	}
	if len(orig.(*corev1.Pod).Labels) != 0 {
		t.Error("the original object was changed in place")
	}
	if w := a.Warnings(); !slices.Equal(w, []string{"w1", "w2"}) {
		t.Errorf("warnings %q", w)
	}
	if w := a.Warnings(); len(w) != 0 {
		t.Errorf("warnings not forgotten once read: %q", w)
	}
}

func TestAttributesGVK(t *testing.T) {
	a := &admission.Attributes{Resource: pods}
	if got := a.GVK(); got != corev1.SchemeGroupVersion.WithKind("Pod") {
		t.Errorf("GVK %v", got)
	}
	a.Kind = corev1.SchemeGroupVersion.WithKind("Binding")
	if got := a.GVK(); got.Kind != "Binding" {
		t.Errorf("subresource GVK %v", got)
	}
	if got := a.GVR(); got != corev1.SchemeGroupVersion.WithResource("pods") {
		t.Errorf("GVR %v", got)
	}
}
