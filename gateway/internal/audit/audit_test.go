package audit

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

const testPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:kube-proxy"]
- level: RequestResponse
  resources: [{group: "", resources: ["configmaps"]}]
- level: Request
  verbs: ["create"]
  namespaces: ["team"]
- level: Metadata
`

func newAuditor(t *testing.T, buffer int) (*Auditor, string) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(p, []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "audit.log")
	a, err := New(Config{PolicyFile: p, Path: log, Buffer: buffer, Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return a, log
}

func TestEvaluate(t *testing.T) {
	a, _ := newAuditor(t, 0)
	f := func(attrs authorizer.AttributesRecord, level auditv1.Level, received bool) {
		t.Helper()
		d := a.Evaluate(&attrs)
		if d.Level != level || d.Logs(auditv1.StageRequestReceived) != received {
			t.Errorf("%+v: got %s (RequestReceived %v), want %s", attrs, d.Level, d.Logs(auditv1.StageRequestReceived), level)
		}
	}
	alice := &user.DefaultInfo{Name: "alice"}
	f(authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "system:kube-proxy"}, Verb: "get", Resource: "configmaps", ResourceRequest: true}, auditv1.LevelNone, false)
	f(authorizer.AttributesRecord{User: alice, Verb: "get", Resource: "configmaps", ResourceRequest: true}, auditv1.LevelRequestResponse, false)
	f(authorizer.AttributesRecord{User: alice, Verb: "create", Namespace: "team", Resource: "pods", ResourceRequest: true}, auditv1.LevelRequest, false)
	f(authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/version"}, auditv1.LevelMetadata, false)
}

func TestEmitWritesAndDrops(t *testing.T) {
	a, log := newAuditor(t, 2)
	for range 3 { // the third does not fit: the writer is not running
		a.Emit(&auditv1.Event{Level: auditv1.LevelMetadata, Stage: auditv1.StageResponseComplete, Verb: "get"})
	}
	var m dto.Metric
	if err := a.dropped.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Fatalf("dropped %v, want 1", got)
	}
	done := make(chan struct{})
	go func() { a.Run(); close(done) }()
	if err := a.Close(true); err != nil {
		t.Fatal(err)
	}
	<-done
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || !bytes.Contains([]byte(lines[0]), []byte(`"apiVersion":"audit.k8s.io/v1"`)) {
		t.Fatalf("log:\n%s", data)
	}
	a.Emit(&auditv1.Event{}) // after Close: dropped, no panic
}
