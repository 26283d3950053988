package negotiate

import (
	"net/http"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
)

// scope is kube-apiserver's handlers.RequestScope restrictions, copied
// verbatim (AllowsMediaTypeTransform, AllowsServerVersion,
// AllowsStreamSchema of k8s.io/apiserver/pkg/endpoints/handlers/rest.go
// v0.37.2): importing that package needs modules kgate does not require.
// Every resource has a TableConvertor, so that check is always true.
type scope struct {
	StandardSerializers []runtime.SerializerInfo
	MetaGroupVersion    schema.GroupVersion
}

func (scope *scope) AllowsMediaTypeTransform(mimeType, mimeSubType string, gvk *schema.GroupVersionKind) bool {
	if gvk == nil {
		if len(scope.StandardSerializers) == 0 {
			return true
		}
		for _, info := range scope.StandardSerializers {
			if info.MediaTypeType == mimeType && info.MediaTypeSubType == mimeSubType {
				return true
			}
		}
		return false
	}
	if gvk.GroupVersion() == metav1beta1.SchemeGroupVersion || gvk.GroupVersion() == metav1.SchemeGroupVersion {
		switch gvk.Kind {
		case "Table":
			return mimeType == "application" &&
				(mimeSubType == "json" || mimeSubType == "yaml")
		case "PartialObjectMetadata", "PartialObjectMetadataList":
			return true
		default:
			return false
		}
	}
	return false
}

func (scope *scope) AllowsServerVersion(version string) bool {
	return version == scope.MetaGroupVersion.Version
}

func (scope *scope) AllowsStreamSchema(s string) bool {
	return s == "watch"
}

// upstreamNegotiate negotiates with kube-apiserver's code: a resource
// endpoint's RequestScope (restricted to JSON and YAML without protobuf,
// as for custom resources) or the default restrictions of non-resource
// endpoints, and for watches the second, streaming negotiation.
func upstreamNegotiate(f *fixture, accept string, e Endpoint) (Media, bool) {
	ns := f.codec.factory
	var restrictions negotiation.EndpointRestrictions = negotiation.DefaultEndpointRestrictions
	if e.Resource {
		scope := &scope{MetaGroupVersion: metav1.SchemeGroupVersion}
		if !e.Protobuf {
			scope.StandardSerializers = []runtime.SerializerInfo{f.codec.infos[JSON], f.codec.infos[YAML]}
		}
		restrictions = scope
	}
	req := &http.Request{Header: http.Header{}, URL: &url.URL{}}
	req.Header.Set("Accept", accept)
	mt, info, err := negotiation.NegotiateOutputMediaType(req, ns, restrictions)
	if err != nil {
		return Media{}, false
	}
	if e.Watch {
		if _, err := negotiation.NegotiateOutputMediaTypeStream(req, ns, restrictions); err != nil {
			return Media{}, false
		}
	}
	m := Media{Profile: mt.Profile, Stream: e.Watch}
	switch info.MediaType {
	case MediaJSON:
		m.Format = JSON
	case MediaYAML:
		m.Format = YAML
	case MediaProtobuf:
		m.Format = Protobuf
	}
	m.Pretty = mt.Pretty && m.Format == JSON
	if c := mt.Convert; c != nil {
		switch c.Kind {
		case "Table":
			m.As = AsTable
		case "PartialObjectMetadata":
			m.As = AsPartialObjectMetadata
		case "PartialObjectMetadataList":
			m.As = AsPartialObjectMetadataList
		}
		m.AsVersion = c.Version
	}
	return m, true
}

var (
	builtin     = Endpoint{Resource: true, Protobuf: true}
	custom      = Endpoint{Resource: true}
	nonResource = Endpoint{Protobuf: true}
)

func watching(e Endpoint) Endpoint { e.Watch = true; return e }

func TestNegotiate(t *testing.T) {
	const (
		clientGo     = "application/vnd.kubernetes.protobuf, */*"
		kubectlTable = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
		metadata     = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	)
	pb := Media{Format: Protobuf}
	js := Media{Format: JSON}
	tests := []struct {
		name   string
		accept string
		e      Endpoint
		want   Media
		ok     bool
	}{
		{"empty", "", builtin, js, true},
		{"any", "*/*", builtin, js, true},
		{"client-go default", clientGo, builtin, pb, true},
		{"client-go default, custom resource", clientGo, custom, js, true},
		{"client-go default, watch", clientGo, watching(builtin), Media{Format: Protobuf, Stream: true}, true},
		{"client-go json", "application/json, */*", builtin, js, true},
		{"kubectl table", kubectlTable, builtin, Media{Format: JSON, As: AsTable, AsVersion: "v1"}, true},
		{"kubectl table, watch", kubectlTable, watching(custom), Media{Format: JSON, As: AsTable, AsVersion: "v1", Stream: true}, true},
		{"kubectl table, non-resource", kubectlTable, nonResource, js, true},
		{"table v1beta1", "application/json;as=Table;v=v1beta1;g=meta.k8s.io", builtin, Media{Format: JSON, As: AsTable, AsVersion: "v1beta1"}, true},
		{"table yaml", "application/yaml;as=Table;v=v1;g=meta.k8s.io", builtin, Media{Format: YAML, As: AsTable, AsVersion: "v1"}, true},
		{"table protobuf refused", "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json", builtin, js, true},
		{"table without group", "application/json;as=Table;v=v1", builtin, Media{}, false},
		{"table bad version", "application/json;as=Table;v=v2;g=meta.k8s.io", builtin, Media{}, false},
		{"unknown conversion", "application/json;as=Pod;v=v1;g=meta.k8s.io", builtin, Media{}, false},
		{"metadata informer", metadata, builtin, Media{Format: Protobuf, As: AsPartialObjectMetadataList, AsVersion: "v1"}, true},
		{"metadata informer, custom resource", metadata, custom, Media{Format: Protobuf, As: AsPartialObjectMetadataList, AsVersion: "v1"}, true},
		{"metadata", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", builtin, Media{Format: JSON, As: AsPartialObjectMetadata, AsVersion: "v1"}, true},
		{"yaml", "application/yaml", builtin, Media{Format: YAML}, true},
		{"yaml watch", "application/yaml", watching(builtin), Media{}, false},
		{"yaml first, watch", "application/yaml, application/json", watching(builtin), Media{}, false},
		{"json then yaml, watch", "application/json, application/yaml", watching(builtin), Media{Format: JSON, Stream: true}, true},
		{"stream=watch", "application/json;stream=watch", watching(builtin), Media{Format: JSON, Stream: true}, true},
		{"stream=watch protobuf", "application/vnd.kubernetes.protobuf;stream=watch", watching(builtin), Media{Format: Protobuf, Stream: true}, true},
		{"yaml stream", "application/yaml;stream=watch", builtin, Media{}, false},
		{"bad stream", "application/json;stream=other, application/yaml", builtin, Media{Format: YAML}, true},
		{"protobuf custom resource", "application/vnd.kubernetes.protobuf", custom, Media{}, false},
		{"q values", "application/json;q=0.5, application/yaml", builtin, Media{Format: YAML}, true},
		{"q zero still counts", "application/json;q=0", builtin, js, true},
		{"wildcard subtype", "application/*", builtin, js, true},
		{"wildcard type only", "*/json", builtin, Media{}, false},
		{"bare star", "*", builtin, js, true},
		{"text", "text/html", builtin, Media{}, false},
		{"browser", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", builtin, js, true},
		{"pretty", "application/json;pretty=1", builtin, Media{Format: JSON, Pretty: true}, true},
		{"pretty yaml", "application/yaml;pretty=1", builtin, Media{Format: YAML}, true},
		{"server version", "application/json;sv=v1", builtin, js, true},
		{"server version, non-resource", "application/json;sv=v1", nonResource, Media{}, false},
		{"bad server version", "application/json;sv=v2", builtin, Media{}, false},
		{"profile", "application/json;profile=nopeer", nonResource, Media{Format: JSON, Profile: "nopeer"}, true},
		{"case matters", "Application/JSON", builtin, Media{}, false},
		{"spaces", "  application/json ; as = Table ; g = meta.k8s.io ; v = v1  ", builtin, Media{Format: JSON, As: AsTable, AsVersion: "v1"}, true},
		{"empty param value", "application/json;as=", builtin, js, true},
		{"blank param value", "application/json;as= ;x=y", builtin, Media{}, false},
		{"blank param value at end", "application/json;as= ", builtin, js, true},
		{"many clauses", "a/a,b/b,c/c,d/d,e/e,f/f,g/g,h/h,i/i,j/j,k/k,l/l,m/m,application/yaml;q=0.1,application/json;q=0.2", builtin, js, true},
	}
	f := newFixture(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Negotiate(tt.accept, tt.e)
			if (err == nil) != tt.ok {
				t.Fatalf("error = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !apierrors.IsNotAcceptable(err) {
				t.Fatalf("error %v is not a 406", err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			up, upOK := upstreamNegotiate(f, tt.accept, tt.e)
			if upOK != tt.ok || up != tt.want {
				t.Fatalf("kube-apiserver negotiates %+v (ok %v)", up, upOK)
			}
		})
	}
}

func TestNegotiateErrors(t *testing.T) {
	_, err := Negotiate("text/html", builtin)
	want := "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	_, err = Negotiate("application/yaml", watching(builtin))
	want = "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestContentTypeOfMedia(t *testing.T) {
	tests := []struct {
		m    Media
		want string
	}{
		{Media{Format: JSON}, "application/json"},
		{Media{Format: JSON, Stream: true}, "application/json"},
		{Media{Format: JSON, As: AsTable}, "application/json"},
		{Media{Format: YAML}, "application/yaml"},
		{Media{Format: Protobuf}, "application/vnd.kubernetes.protobuf"},
		{Media{Format: Protobuf, Stream: true}, "application/vnd.kubernetes.protobuf;stream=watch"},
	}
	for _, tt := range tests {
		if got := tt.m.ContentType(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.m, got, tt.want)
		}
	}
}

func TestPrettyHint(t *testing.T) {
	tests := []struct {
		pretty, ua string
		want       bool
	}{
		{"", "", false},
		{"true", "", true},
		{"1", "kubectl/v1.37", true},
		{"false", "curl/8.0", false},
		{"nonsense", "curl/8.0", false},
		{"", "curl/8.0", true},
		{"", "Wget/1.21", true},
		{"", "Mozilla/5.0 (X11)", true},
		{"", "kubectl/v1.37.0 (linux/amd64)", false},
	}
	for _, tt := range tests {
		if got := PrettyHint(tt.pretty, tt.ua); got != tt.want {
			t.Errorf("PrettyHint(%q, %q) = %v", tt.pretty, tt.ua, got)
		}
	}
}

// FuzzNegotiate compares Negotiate with kube-apiserver's negotiation on
// random Accept headers for every kind of endpoint.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{
		"", "*/*", "application/vnd.kubernetes.protobuf, */*",
		"application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
		"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
		"application/yaml;q=0.9, application/json;q=0.1;stream=watch", "application/json;sv=v1;pretty=1;profile=x",
		"a/b,c/d,e/f,g/h,i/j,k/l,m/n,o/p,q/r,s/t,u/v,w/x,*/*;q=0.1,application/yaml;q=NaN",
	} {
		f.Add(s, uint8(0))
	}
	fx := newFixture(f)
	endpoints := []Endpoint{builtin, custom, nonResource, watching(builtin), watching(custom)}
	f.Fuzz(func(t *testing.T, accept string, which uint8) {
		e := endpoints[int(which)%len(endpoints)]
		got, err := Negotiate(accept, e)
		up, upOK := upstreamNegotiate(fx, accept, e)
		if (err == nil) != upOK || got != up {
			t.Fatalf("Negotiate(%q, %+v) = %+v, %v; kube-apiserver %+v, ok %v", accept, e, got, err, up, upOK)
		}
	})
}
