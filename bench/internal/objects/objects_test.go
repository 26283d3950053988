package objects

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodSize(t *testing.T) {
	p := Pod("kgate-bench-0", "kgate-bench-pod-000123", "seed", 123)
	// What a server returns carries these too.
	p.UID = "1f0b6c2e-3d4a-4c5b-8e6f-7a8b9c0d1e2f"
	p.ResourceVersion = "123456"
	p.CreationTimestamp = metav1.Now()
	SetRunningStatus(p, 123)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b); n < 4600 || n > 4800 {
		t.Fatalf("pod is %d bytes of JSON, want about 4.7 KB", n)
	}
	if testing.Verbose() {
		t.Logf("pod: %d bytes of JSON", len(b))
	}
}

func TestConfigMapSize(t *testing.T) {
	for _, size := range []int{1, 100, 1024, 10000} {
		cm := ConfigMap("ns", "cm", "seed", size)
		if n := len(cm.Data["application.properties"]); n != size {
			t.Errorf("ConfigMap(%d) holds %d bytes", size, n)
		}
	}
}
