package scenario

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kgate/kgate/bench/internal/objects"
)

func TestRawList(t *testing.T) {
	l := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "tok-en"}}
	for i := range 3 {
		p := objects.Pod("ns", "p", "seed", i)
		objects.SetRunningStatus(p, i)
		l.Items = append(l.Items, *p)
	}
	js, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var pb []byte
	{
		s := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
		var buf bytesBuffer
		if err := s.Encode(l, &buf); err != nil {
			t.Fatal(err)
		}
		pb = buf.b
	}
	for format, body := range map[string][]byte{"json": js, "proto": pb} {
		n, cont, err := rawList(body, format)
		if err != nil || n != 3 || cont != "tok-en" {
			t.Errorf("%s: rawList = %d, %q, %v", format, n, cont, err)
		}
	}
	if _, _, err := rawList([]byte("{}"), "proto"); err == nil {
		t.Error("a JSON body read as protobuf")
	}
}

type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
