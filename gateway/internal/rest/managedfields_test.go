package rest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apifieldmanager "k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager"

	"github.com/kgate/kgate/storage"
)

const cmWithFields = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}}]},"data":{"a":"b"}}`

// TestManagedFieldsResetAfterAdmission: managedFields that mutating
// admission leaves invalid are reset to their state before admission,
// with upstream's warning (NewManagedFieldsValidatingAdmissionController).
func TestManagedFieldsResetAfterAdmission(t *testing.T) {
	e := newEnv(t)
	e.adm.corrupt = true
	r := e.do("POST", "/api/v1/namespaces/ns/configmaps", []byte(cmWithFields))
	if r.code != 201 {
		t.Fatalf("create: %d %+v", r.code, r.status)
	}
	cm := e.stored(configmapsGVR, "ns", "c").(*corev1.ConfigMap)
	if len(cm.ManagedFields) != 1 || cm.ManagedFields[0].Manager != "kubectl" || cm.ManagedFields[0].Operation != metav1.ManagedFieldsOperationUpdate {
		t.Errorf("stored managedFields %+v, want the ones sent", cm.ManagedFields)
	}
	want := strings.SplitN(apifieldmanager.InvalidManagedFieldsAfterMutatingAdmissionWarningFormat, ";", 2)[0]
	if w := string(r.header.Peek("Warning")); !strings.Contains(w, want) {
		t.Errorf("Warning %q, want upstream's %q", w, want)
	}

	// Valid managedFields from admission are kept.
	e2 := newEnv(t)
	r = e2.do("POST", "/api/v1/namespaces/ns/configmaps", []byte(cmWithFields))
	if r.code != 201 || len(r.header.Peek("Warning")) > 0 {
		t.Fatalf("create: %d, warning %q", r.code, r.header.Peek("Warning"))
	}
}

// TestTooLargeRetriedWithoutManagedFields: a create, update or patch
// whose result is too large for etcd is tried again without
// managedFields, as upstream's handlers do.
func TestTooLargeRetriedWithoutManagedFields(t *testing.T) {
	e := newEnv(t)
	e.store.tooLarge = true
	r := e.do("POST", "/api/v1/namespaces/ns/configmaps", []byte(cmWithFields))
	if r.code != 201 {
		t.Fatalf("create: %d %+v", r.code, r.status)
	}
	if cm := e.stored(configmapsGVR, "ns", "c").(*corev1.ConfigMap); len(cm.ManagedFields) != 0 || cm.Data["a"] != "b" {
		t.Errorf("created %+v", cm)
	}
	put := strings.Replace(cmWithFields, `"a":"b"`, `"a":"c"`, 1)
	if r := e.do("PUT", "/api/v1/namespaces/ns/configmaps/c", []byte(put)); r.code != 200 {
		t.Fatalf("update: %d %+v", r.code, r.status)
	}
	if cm := e.stored(configmapsGVR, "ns", "c").(*corev1.ConfigMap); len(cm.ManagedFields) != 0 || cm.Data["a"] != "c" {
		t.Errorf("updated %+v", cm)
	}
	patch := `{"metadata":{"managedFields":[{"manager":"m","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}}]},"data":{"a":"d"}}`
	if r := e.do("PATCH", "/api/v1/namespaces/ns/configmaps/c", []byte(patch), "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("patch: %d %+v", r.code, r.status)
	}
	if cm := e.stored(configmapsGVR, "ns", "c").(*corev1.ConfigMap); len(cm.ManagedFields) != 0 || cm.Data["a"] != "d" {
		t.Errorf("patched %+v", cm)
	}
	// A write still too large without managedFields fails.
	e.store.tooLarge = false
	e.store.createErr = storage.ErrTooLarge
	if r := e.do("POST", "/api/v1/namespaces/ns/configmaps", []byte(strings.Replace(cmWithFields, `"name":"c"`, `"name":"d"`, 1))); r.code/100 == 2 {
		t.Errorf("create failing as too large: %d", r.code)
	}
}
