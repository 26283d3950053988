package limitranger_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/admission/limitranger"
	"github.com/kgate/kgate/storage/registry"
)

type lister map[string][]runtime.Object

func (l lister) List(ns string) []runtime.Object { return l[ns] }

var podsRes = &registry.Resource{Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true}

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func limitRange(items ...corev1.LimitRangeItem) *corev1.LimitRange {
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: items}}
}

func pod(res ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	for _, r := range res {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c", Resources: r})
	}
	return p
}

func TestAdmitDefaults(t *testing.T) {
	p := limitranger.Plugin{LimitRanges: lister{"ns": {
		limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("cpu", "500m", "memory", "256Mi"), DefaultRequest: rl("cpu", "100m")}),
		// Pod-level items and other kinds of objects are not container defaults.
		limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "1m")}),
		&corev1.ConfigMap{},
	}}}
	obj := pod(corev1.ResourceRequirements{}, corev1.ResourceRequirements{Limits: rl("cpu", "2")})
	obj.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	a := &admission.Attributes{Resource: podsRes, Operation: admission.Create, Namespace: "ns", Name: "p", Object: obj}
	if err := p.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	got := a.Object.(*corev1.Pod)
	for _, c := range []struct {
		name      string
		r         corev1.ResourceRequirements
		lim, req  string // cpu
		memoryLim string
	}{
		{"container 0", got.Spec.Containers[0].Resources, "500m", "100m", "256Mi"},
		{"container 1 keeps its own limit", got.Spec.Containers[1].Resources, "2", "100m", "256Mi"},
		{"init container", got.Spec.InitContainers[0].Resources, "500m", "100m", "256Mi"},
	} {
		if q := c.r.Limits[corev1.ResourceCPU]; q.String() != c.lim {
			t.Errorf("%s: cpu limit %s, want %s", c.name, q.String(), c.lim)
		}
		if q := c.r.Requests[corev1.ResourceCPU]; q.String() != c.req {
			t.Errorf("%s: cpu request %s, want %s", c.name, q.String(), c.req)
		}
		if q := c.r.Limits[corev1.ResourceMemory]; q.String() != c.memoryLim {
			t.Errorf("%s: memory limit %s, want %s", c.name, q.String(), c.memoryLim)
		}
	}
}

func TestAdmitOnlyNewPods(t *testing.T) {
	p := limitranger.Plugin{LimitRanges: lister{"ns": {limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("cpu", "1")})}}}
	for _, a := range []*admission.Attributes{
		{Resource: podsRes, Operation: admission.Update, Namespace: "ns", Object: pod(corev1.ResourceRequirements{})},
		{Resource: podsRes, Operation: admission.Create, Subresource: "binding", Namespace: "ns", Object: pod(corev1.ResourceRequirements{})},
		{Resource: podsRes, Operation: admission.Create, Namespace: "other", Object: pod(corev1.ResourceRequirements{})},
	} {
		if err := p.Admit(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		if l := a.Object.(*corev1.Pod).Spec.Containers[0].Resources.Limits; len(l) != 0 {
			t.Errorf("%s %s in %s defaulted: %v", a.Operation, a.Subresource, a.Namespace, l)
		}
	}
	// A non-pod object passes untouched.
	cm := &admission.Attributes{Resource: podsRes, Operation: admission.Create, Namespace: "ns", Object: &corev1.ConfigMap{}}
	if err := p.Admit(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	item := corev1.LimitRangeItem{
		Type: corev1.LimitTypeContainer, Min: rl("cpu", "100m"), Max: rl("memory", "1Gi"),
		MaxLimitRequestRatio: rl("cpu", "4"),
	}
	p := limitranger.Plugin{LimitRanges: lister{"ns": {limitRange(item)}}}
	for _, tc := range []struct {
		name string
		r    corev1.ResourceRequirements
		want string // a fragment of the message; "" admitted
	}{
		{"within bounds", corev1.ResourceRequirements{Requests: rl("cpu", "200m"), Limits: rl("cpu", "400m", "memory", "512Mi")}, ""},
		{"ratio exactly at the bound", corev1.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("cpu", "400m", "memory", "1Gi")}, ""},
		{"no request for a minimum", corev1.ResourceRequirements{Limits: rl("memory", "1Gi")}, "minimum cpu usage per Container is 100m.  No request is specified"},
		{"request below minimum", corev1.ResourceRequirements{Requests: rl("cpu", "50m"), Limits: rl("memory", "1Gi")}, "minimum cpu usage per Container is 100m, but request is 50m"},
		{"no limit for a maximum", corev1.ResourceRequirements{Requests: rl("cpu", "100m")}, "maximum memory usage per Container is 1Gi.  No limit is specified"},
		{"limit above maximum", corev1.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("memory", "2Gi")}, "maximum memory usage per Container is 1Gi, but limit is 2Gi"},
		{"ratio above maximum", corev1.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("cpu", "500m", "memory", "1Gi")}, "cpu max limit to request ratio per Container is 4, but provided ratio is 5.000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Validate(context.Background(), &admission.Attributes{Resource: podsRes, Operation: admission.Create, Namespace: "ns", Name: "p", Object: pod(tc.r)})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var se apierrors.APIStatus
			if !errors.As(err, &se) || se.Status().Code != http.StatusForbidden {
				t.Fatalf("error %v, want 403", err)
			}
			if !strings.Contains(se.Status().Message, tc.want) {
				t.Errorf("message %q lacks %q", se.Status().Message, tc.want)
			}
		})
	}
}
