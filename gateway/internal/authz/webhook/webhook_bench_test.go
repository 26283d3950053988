package webhook

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kgate/kgate/gateway/internal/authz"
)

// BenchmarkAuthorizeCached measures a decision found in the cache, the
// webhook authorizer's usual case: a list with selectors and a get.
func BenchmarkAuthorizeCached(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, answer(true, false, "ok"))
	}))
	b.Cleanup(srv.Close)
	file := filepath.Join(b.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"authz": {Server: srv.URL}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"kgate": {}},
		Contexts:       map[string]*clientcmdapi.Context{"webhook": {Cluster: "authz", AuthInfo: "kgate"}},
		CurrentContext: "webhook",
	}, file); err != nil {
		b.Fatal(err)
	}
	w, err := New(context.Background(), Config{ConfigFile: file, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	get := authz.Attributes{User: &user.DefaultInfo{Name: "alice", Groups: []string{"team-a", "system:authenticated"}},
		IsResourceRequest: true, Verb: "get", Namespace: "a", APIVersion: "v1", Resource: "pods", Name: "web",
		Path: "/api/v1/namespaces/a/pods/web"}
	for _, c := range []struct {
		name string
		a    authz.Attributes
	}{{"list", listPods}, {"get", get}} {
		b.Run(c.name, func(b *testing.B) {
			if d, _ := w.Authorize(c.a); d != authz.Allow { // fills the cache
				b.Fatal(d)
			}
			b.ReportAllocs()
			for b.Loop() {
				if d, _ := w.Authorize(c.a); d != authz.Allow {
					b.Fatal(d)
				}
			}
		})
	}
}
