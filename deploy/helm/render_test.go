package helm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "kgate"
	baseDir  = "../kubernetes"
	// baseFile is the part of the kustomize base rendered from the chart.
	baseFile = "kgate.yaml"
	// The release the base is rendered as.
	releaseName      = "kgate"
	releaseNamespace = "kgate"
)

// tool is the binary named by env, or a skip saying how to get one.
func tool(t *testing.T, env, make string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		t.Skipf("needs %s (make %s builds it; make test sets it)", env, make)
	}
	return bin
}

// run runs bin with args and returns its standard output; a failure
// fails the test with its standard error.
func run(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// render is helm template of the chart as the base's release, with the
// values files given (relative to this folder).
func render(t *testing.T, valuesFiles ...string) []byte {
	t.Helper()
	args := []string{"template", releaseName, chartDir, "--namespace", releaseNamespace}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	return run(t, tool(t, "HELM_BIN", "helm"), args...)
}

// object is one rendered object: decoded strictly into its typed
// k8s.io/api struct (typed), and as unstructured (u) for every kind.
type object struct {
	u     *unstructured.Unstructured
	typed runtime.Object // nil for kinds outside client-go's scheme
}

func (o object) String() string { return o.u.GetKind() + "/" + o.u.GetName() }

// thirdParty are the kinds of other projects' APIs the chart renders,
// checked as unstructured objects: what each must carry in spec.
var thirdParty = map[string][]string{
	"monitoring.coreos.com/v1, Kind=ServiceMonitor": {"selector", "endpoints"},
	"monitoring.coreos.com/v1, Kind=PrometheusRule": {"groups"},
	"cert-manager.io/v1, Kind=Certificate":          {"secretName", "issuerRef"},
}

// strictDecoder decodes into client-go's scheme (every k8s.io/api type)
// and fails on unknown and duplicate fields.
var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// decode splits a multi-document YAML stream and decodes each object:
// built-in kinds strictly into their k8s.io/api type, the kinds of
// thirdParty as unstructured with their required spec fields. Any other
// kind fails the test.
func decode(t *testing.T, stream []byte) []object {
	t.Helper()
	var out []object
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("cannot split the rendered YAML: %v", err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("cannot read a rendered document: %v\n%s", err, doc)
		}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatalf("cannot read a rendered object: %v\n%s", err, doc)
		}
		o := object{u: u}
		gvk := u.GroupVersionKind()
		if fields, ok := thirdParty[gvk.String()]; ok {
			for _, f := range fields {
				if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", f); !found {
					t.Errorf("%s: no spec.%s", o, f)
				}
			}
		} else {
			typed, _, err := strictDecoder.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s does not decode strictly into its k8s.io/api type: %v", o, err)
				continue
			}
			o.typed = typed
		}
		if u.GetName() == "" {
			t.Errorf("an object of kind %s without a name", gvk)
		}
		if u.GetNamespace() != releaseNamespace && gvk.Kind != "Namespace" {
			t.Errorf("%s in namespace %q, want the release's %q", o, u.GetNamespace(), releaseNamespace)
		}
		out = append(out, o)
	}
	return out
}

// stripComments drops comment lines, so that a document of comments
// alone counts as empty.
func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			b.Write(line)
		}
	}
	return b.Bytes()
}

// find is the rendered object of kind and name, typed as T.
func find[T runtime.Object](t *testing.T, objs []object, kind, name string) T {
	t.Helper()
	for _, o := range objs {
		if o.u.GetKind() == kind && o.u.GetName() == name {
			typed, ok := o.typed.(T)
			if !ok {
				t.Fatalf("%s is a %T", o, o.typed)
			}
			return typed
		}
	}
	var zero T
	t.Fatalf("no %s/%s rendered", kind, name)
	return zero
}

func kinds(objs []object) string {
	var s []string
	for _, o := range objs {
		s = append(s, o.String())
	}
	return fmt.Sprint(s)
}
