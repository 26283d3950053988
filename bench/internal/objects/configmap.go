package objects

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigMap has about size bytes of data in lines of a properties file.
func ConfigMap(namespace, name, set string, size int) *corev1.ConfigMap {
	var b strings.Builder
	for k := 0; b.Len() < size; k++ {
		fmt.Fprintf(&b, "setting.%04d=value-%08x-%s\n", k, k*2654435761, strings.Repeat("x", 24))
	}
	data := b.String()
	if len(data) > size {
		data = data[:size]
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{LabelBench: "true", LabelSet: set},
		},
		Data: map[string]string{"application.properties": data},
	}
}
