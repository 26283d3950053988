package defaults

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestNamespace(t *testing.T) {
	runCases(t, &corev1.Namespace{}, []applyCase{{
		name: "named",
		in:   `{"metadata":{"name":"team-a","labels":{"x":"y"}}}`,
		want: `{"metadata":{"name":"team-a","labels":{"x":"y","kubernetes.io/metadata.name":"team-a"}},"status":{"phase":"Active"}}`,
	}, {
		name: "label overwritten",
		in:   `{"metadata":{"name":"team-a","labels":{"kubernetes.io/metadata.name":"other"}}}`,
		want: `{"metadata":{"name":"team-a","labels":{"kubernetes.io/metadata.name":"team-a"}},"status":{"phase":"Active"}}`,
	}, {
		name: "generated name",
		in:   `{"metadata":{"generateName":"team-"}}`,
		want: `{"metadata":{"generateName":"team-"},"status":{"phase":"Active"}}`,
	}})
}

func TestSecretAndConfigMap(t *testing.T) {
	runCases(t, &corev1.Secret{}, []applyCase{
		{name: "opaque", in: `{"data":{"k":"dg=="}}`, want: `{"data":{"k":"dg=="},"type":"Opaque"}`},
		{name: "typed", in: `{"type":"kubernetes.io/tls"}`, want: `{"type":"kubernetes.io/tls"}`},
	})
	runCases(t, &corev1.ConfigMap{}, []applyCase{
		{name: "empty", in: `{}`, want: `{}`},
	})
	cm := &corev1.ConfigMap{}
	Apply(cm)
	if cm.Data == nil {
		t.Error("ConfigMap data is nil, want an empty map")
	}
}

func TestNode(t *testing.T) {
	runCases(t, &corev1.Node{}, []applyCase{{
		name: "allocatable from capacity",
		in:   `{"status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110"}}}`,
		want: `{"status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110"},"allocatable":{"cpu":"4","memory":"8Gi","pods":"110"}}}`,
	}, {
		name: "allocatable kept",
		in:   `{"status":{"capacity":{"cpu":"4"},"allocatable":{"cpu":"3500m"}}}`,
		want: `{"status":{"capacity":{"cpu":"4"},"allocatable":{"cpu":"3500m"}}}`,
	}})
}

func TestPersistentVolume(t *testing.T) {
	runCases(t, &corev1.PersistentVolume{}, []applyCase{{
		name: "host path",
		in:   `{"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"hostPath":{"path":"/data"}}}`,
		want: `{"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"hostPath":{"path":"/data","type":""},
			"persistentVolumeReclaimPolicy":"Retain","volumeMode":"Filesystem"},"status":{"phase":"Pending"}}`,
	}, {
		name: "kept",
		in:   `{"spec":{"persistentVolumeReclaimPolicy":"Delete","volumeMode":"Block","csi":{"driver":"d","volumeHandle":"h"}},"status":{"phase":"Bound"}}`,
		want: `{"spec":{"persistentVolumeReclaimPolicy":"Delete","volumeMode":"Block","csi":{"driver":"d","volumeHandle":"h"}},"status":{"phase":"Bound"}}`,
	}})
}

func TestPersistentVolumeClaim(t *testing.T) {
	runCases(t, &corev1.PersistentVolumeClaim{}, []applyCase{{
		name: "minimal",
		in:   `{"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1.5Gi"}}}}`,
		want: `{"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1536Mi"}},"volumeMode":"Filesystem"},"status":{"phase":"Pending"}}`,
	}})
}

func TestLimitRange(t *testing.T) {
	runCases(t, &corev1.LimitRange{}, []applyCase{{
		name: "container",
		in:   `{"spec":{"limits":[{"type":"Container","max":{"cpu":"2","memory":"1Gi"},"min":{"cpu":"100m","memory":"64Mi"},"default":{"memory":"512Mi"}}]}}`,
		want: `{"spec":{"limits":[{"type":"Container","max":{"cpu":"2","memory":"1Gi"},"min":{"cpu":"100m","memory":"64Mi"},
			"default":{"cpu":"2","memory":"512Mi"},"defaultRequest":{"cpu":"2","memory":"512Mi"}}]}}`,
	}, {
		name: "min only",
		in:   `{"spec":{"limits":[{"type":"Container","min":{"cpu":"100m"}}]}}`,
		want: `{"spec":{"limits":[{"type":"Container","min":{"cpu":"100m"},"default":{},"defaultRequest":{"cpu":"100m"}}]}}`,
	}, {
		name: "pod",
		in:   `{"spec":{"limits":[{"type":"Pod","max":{"cpu":"4"}}]}}`,
		want: `{"spec":{"limits":[{"type":"Pod","max":{"cpu":"4"}}]}}`,
	}})
}

func TestResourceQuota(t *testing.T) {
	runCases(t, &corev1.ResourceQuota{}, []applyCase{{
		name: "rounded",
		in:   `{"spec":{"hard":{"requests.cpu":"0.0005","pods":"10"}}}`,
		want: `{"spec":{"hard":{"requests.cpu":"1m","pods":"10"}}}`,
	}})
}
