package builtin

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
)

// TestGeneration: metadata.generation is what upstream's strategy makes
// it (storage no longer computes one), per kind and subresource. Each
// case states the expected generation and checks it against the imported
// strategy called directly (rest.BeforeUpdate's generation reset, then
// PrepareForUpdate) on the same internal objects.
func TestGeneration(t *testing.T) {
	s := newSemantics(t)
	image := func(p *corev1.Pod, img string) *corev1.Pod { p.Spec.Containers[0].Image = img; return p }
	tests := []struct {
		name        string
		group, res  string
		subresource string
		old, obj    runtime.Object
		want        int64
	}{
		{name: "deployment spec change bumps", group: "apps", res: "deployments",
			old: deploymentAt(3, 2, 2), obj: deploymentAt(3, 4, 2), want: 4},
		{name: "deployment spec unchanged keeps", group: "apps", res: "deployments",
			old: deploymentAt(3, 2, 2), obj: deploymentAt(3, 2, 2), want: 3},
		{name: "deployment labels only keep", group: "apps", res: "deployments",
			old: deploymentAt(3, 2, 2), obj: func() runtime.Object {
				d := deploymentAt(3, 2, 2)
				d.Labels = map[string]string{"a": "b"}
				return d
			}(), want: 3},
		// Upstream's deployment strategy bumps on annotation changes too
		// (what storage's own spec-only rule missed).
		{name: "deployment annotations bump", group: "apps", res: "deployments",
			old: deploymentAt(3, 2, 2), obj: func() runtime.Object {
				d := deploymentAt(3, 2, 2)
				d.Annotations = map[string]string{"a": "b"}
				return d
			}(), want: 4},
		{name: "deployment status update keeps", group: "apps", res: "deployments", subresource: "status",
			old: deploymentAt(3, 2, 2), obj: deploymentAt(3, 9, 5), want: 3},
		{name: "deployment generation sent by the client is ignored", group: "apps", res: "deployments",
			old: deploymentAt(3, 2, 2), obj: deploymentAt(40, 2, 2), want: 3},
		{name: "deployment scale bumps", group: "apps", res: "deployments", subresource: "scale",
			old: deploymentAt(3, 2, 2), obj: deploymentAt(3, 5, 2), want: 4},
		{name: "pod image change bumps", group: "", res: "pods",
			old: podWith("nginx:1.29", corev1.PodRunning), obj: image(podWith("nginx:1.29", corev1.PodRunning), "nginx:1.30"), want: 2},
		{name: "pod labels only keep", group: "", res: "pods",
			old: podWith("nginx:1.29", corev1.PodRunning), obj: func() runtime.Object {
				p := podWith("nginx:1.29", corev1.PodRunning)
				p.Labels = map[string]string{"a": "b"}
				return p
			}(), want: 1},
		{name: "pod status update keeps", group: "", res: "pods", subresource: "status",
			old: podWith("nginx:1.29", corev1.PodPending), obj: podWith("nginx:1.29", corev1.PodRunning), want: 1},
		{name: "configmap data change keeps (no generation upstream)", group: "", res: "configmaps",
			old:  &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c", UID: "u1", ResourceVersion: "5"}, Data: map[string]string{"a": "1"}},
			obj:  &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c", UID: "u1", ResourceVersion: "5"}, Data: map[string]string{"a": "2"}},
			want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := resource(t, tt.group, tt.res)
			upstream := upstreamUpdateGeneration(t, s, res.Group, tt.res, tt.subresource, tt.obj, tt.old)
			got, err := s.Update(context.Background(), res, tt.subresource, tt.obj.DeepCopyObject(), tt.old)
			if err != nil || len(got.Errors) > 0 {
				t.Fatalf("Update: %v %v", err, got.Errors)
			}
			m, err := meta.Accessor(got.Object)
			if err != nil {
				t.Fatal(err)
			}
			if m.GetGeneration() != tt.want {
				t.Errorf("generation %d, want %d", m.GetGeneration(), tt.want)
			}
			if upstream != tt.want {
				t.Errorf("upstream's strategy called directly gives generation %d, the case says %d", upstream, tt.want)
			}
		})
	}
}

// upstreamUpdateGeneration is the generation upstream's strategy leaves on
// obj updated over old: conversion to the internal types, the old
// generation kept (rest.BeforeUpdate), PrepareForUpdate of the
// subresource's strategy (the main one for scale).
func upstreamUpdateGeneration(t *testing.T, s *Semantics, group, resourceName, subresource string, obj, old runtime.Object) int64 {
	t.Helper()
	res := resource(t, group, resourceName)
	obj, old = obj.DeepCopyObject(), old.DeepCopyObject()
	s.Default(obj)
	s.Default(old)
	in, err := s.toInternal(res, obj)
	if err != nil {
		t.Fatal(err)
	}
	oldIn, err := s.toInternal(res, old)
	if err != nil {
		t.Fatal(err)
	}
	st := s.strategies[res.GVR().GroupResource()]
	var strat rest.RESTUpdateStrategy = st.main
	if sub, ok := st.sub[subresource]; ok {
		strat = sub
	}
	ctx, err := requestContext(context.Background(), res, subresource, "update", in)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := meta.Accessor(in)
	om, _ := meta.Accessor(oldIn)
	m.SetGeneration(om.GetGeneration())
	strat.PrepareForUpdate(ctx, in, oldIn)
	return m.GetGeneration()
}

// TestCreateGeneration: a create gets the generation upstream's
// PrepareForCreate sets (1 for kinds that track it), and whatever the
// client sent for kinds whose strategy leaves it alone.
func TestCreateGeneration(t *testing.T) {
	s := newSemantics(t)
	tests := []struct {
		name       string
		group, res string
		obj        runtime.Object
		want       int64
	}{
		{"deployment", "apps", "deployments", func() runtime.Object { d := deploymentOf(labels(), labels()); d.Generation = 9; return d }(), 1},
		{"pod", "", "pods", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", Generation: 5},
			Spec: corev1.PodSpec{Containers: []corev1.Container{container()}}}, 1},
		{"configmap", "", "configmaps", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := resource(t, tt.group, tt.res)
			// upstream, directly
			in := tt.obj.DeepCopyObject()
			s.Default(in)
			internal, err := s.toInternal(res, in)
			if err != nil {
				t.Fatal(err)
			}
			ctx, err := requestContext(context.Background(), res, "", "create", internal)
			if err != nil {
				t.Fatal(err)
			}
			s.strategies[res.GVR().GroupResource()].main.PrepareForCreate(ctx, internal)
			m, _ := meta.Accessor(internal)
			if m.GetGeneration() != tt.want {
				t.Errorf("upstream's PrepareForCreate gives generation %d, the case says %d", m.GetGeneration(), tt.want)
			}

			got, err := s.Create(context.Background(), res, "", tt.obj.DeepCopyObject())
			if err != nil || len(got.Errors) > 0 {
				t.Fatalf("Create: %v %v", err, got.Errors)
			}
			gm, _ := meta.Accessor(got.Object)
			if gm.GetGeneration() != tt.want {
				t.Errorf("generation %d, want %d", gm.GetGeneration(), tt.want)
			}
		})
	}
}
