package defaults

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// podSpecDefaults are the fields SetDefaults_PodSpec adds to an empty
// PodSpec, as they appear in any stored pod template.
const podSpecDefaults = `"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",
	"securityContext":{},"schedulerName":"default-scheduler"`

// containerDefaults are the fields every container without pull policy
// gets, but imagePullPolicy.
const containerDefaults = `"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"`

func TestPod(t *testing.T) {
	runCases(t, &corev1.Pod{}, []applyCase{{
		name: "minimal",
		in:   `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`,
		want: `{"metadata":{"name":"p"},"spec":{` + podSpecDefaults + `,"enableServiceLinks":true,
			"containers":[{"name":"c","image":"nginx","imagePullPolicy":"Always",` + containerDefaults + `}]}}`,
	}, {
		name: "kept",
		in: `{"spec":{"restartPolicy":"Never","dnsPolicy":"Default","schedulerName":"other","enableServiceLinks":false,
			"terminationGracePeriodSeconds":0,"securityContext":{"runAsUser":1000},
			"containers":[{"name":"c","image":"nginx","imagePullPolicy":"Never","terminationMessagePath":"/t",
			"terminationMessagePolicy":"FallbackToLogsOnError","ports":[{"containerPort":53,"protocol":"UDP"}]}]}}`,
		want: `{"spec":{"restartPolicy":"Never","dnsPolicy":"Default","schedulerName":"other","enableServiceLinks":false,
			"terminationGracePeriodSeconds":0,"securityContext":{"runAsUser":1000},
			"containers":[{"name":"c","image":"nginx","imagePullPolicy":"Never","terminationMessagePath":"/t",
			"terminationMessagePolicy":"FallbackToLogsOnError","ports":[{"containerPort":53,"protocol":"UDP"}]}]}}`,
	}, {
		name: "containers",
		in: `{"spec":{"hostNetwork":true,
			"initContainers":[{"name":"i","image":"busybox:latest","resources":{"limits":{"cpu":"0.0001"}}}],
			"containers":[{"name":"c","image":"registry.k8s.io/pause:3.9",
				"ports":[{"containerPort":80},{"containerPort":81,"hostPort":8081}],
				"env":[{"name":"POD","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}},
					{"name":"F","valueFrom":{"fileKeyRef":{"volumeName":"v","path":"p","key":"k"}}},{"name":"X","value":"y"}],
				"resources":{"limits":{"cpu":"500m","memory":"128Mi"},"requests":{"cpu":"100m"}},
				"livenessProbe":{"httpGet":{"port":8080}},
				"readinessProbe":{"grpc":{"port":9000},"periodSeconds":5},
				"startupProbe":{"exec":{"command":["true"]},"failureThreshold":30},
				"lifecycle":{"preStop":{"httpGet":{"port":80,"path":"/quit"}},"postStart":{"exec":{"command":["x"]}}}}],
			"ephemeralContainers":[{"name":"e","image":"busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}]}}`,
		want: `{"spec":{"hostNetwork":true,` + podSpecDefaults + `,"enableServiceLinks":true,
			"initContainers":[{"name":"i","image":"busybox:latest","imagePullPolicy":"Always",` + containerDefaults + `,
				"resources":{"limits":{"cpu":"1m"},"requests":{"cpu":"1m"}}}],
			"containers":[{"name":"c","image":"registry.k8s.io/pause:3.9","imagePullPolicy":"IfNotPresent",` + containerDefaults + `,
				"ports":[{"containerPort":80,"hostPort":80,"protocol":"TCP"},{"containerPort":81,"hostPort":8081,"protocol":"TCP"}],
				"env":[{"name":"POD","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}}},
					{"name":"F","valueFrom":{"fileKeyRef":{"volumeName":"v","path":"p","key":"k","optional":false}}},{"name":"X","value":"y"}],
				"resources":{"limits":{"cpu":"500m","memory":"128Mi"},"requests":{"cpu":"100m","memory":"128Mi"}},
				"livenessProbe":{"httpGet":{"port":8080,"path":"/","scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},
				"readinessProbe":{"grpc":{"port":9000,"service":""},"timeoutSeconds":1,"periodSeconds":5,"successThreshold":1,"failureThreshold":3},
				"startupProbe":{"exec":{"command":["true"]},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":30},
				"lifecycle":{"preStop":{"httpGet":{"port":80,"path":"/quit","scheme":"HTTP"}},"postStart":{"exec":{"command":["x"]}}}}],
			"ephemeralContainers":[{"name":"e","image":"busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				"imagePullPolicy":"IfNotPresent",` + containerDefaults + `}]}}`,
	}, {
		name: "volumes",
		in: `{"spec":{"containers":[{"name":"c","image":"nginx:1"}],"volumes":[
			{"name":"empty"},
			{"name":"cm","configMap":{"name":"x"}},
			{"name":"cm-mode","configMap":{"name":"x","defaultMode":256}},
			{"name":"s","secret":{"secretName":"y"}},
			{"name":"d","downwardAPI":{"items":[{"path":"n","fieldRef":{"fieldPath":"metadata.name"}}]}},
			{"name":"p","projected":{"sources":[{"serviceAccountToken":{"path":"token"}},
				{"downwardAPI":{"items":[{"path":"n","fieldRef":{"fieldPath":"metadata.name"}}]}},{"configMap":{"name":"ca"}}]}},
			{"name":"h","hostPath":{"path":"/tmp"}},
			{"name":"e","ephemeral":{"volumeClaimTemplate":{"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}}},
			{"name":"i","image":{"reference":"quay.io/x/y"}},
			{"name":"iscsi","iscsi":{"targetPortal":"t","iqn":"q","lun":0}},
			{"name":"rbd","rbd":{"monitors":["m"],"image":"i"}},
			{"name":"az","azureDisk":{"diskName":"d","diskURI":"u"}},
			{"name":"sio","scaleIO":{"gateway":"g","system":"s","secretRef":null}},
			{"name":"pvc","persistentVolumeClaim":{"claimName":"c"}}]}}`,
		want: `{"spec":{` + podSpecDefaults + `,"enableServiceLinks":true,
			"containers":[{"name":"c","image":"nginx:1","imagePullPolicy":"IfNotPresent",` + containerDefaults + `}],"volumes":[
			{"name":"empty","emptyDir":{}},
			{"name":"cm","configMap":{"name":"x","defaultMode":420}},
			{"name":"cm-mode","configMap":{"name":"x","defaultMode":256}},
			{"name":"s","secret":{"secretName":"y","defaultMode":420}},
			{"name":"d","downwardAPI":{"items":[{"path":"n","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}}],"defaultMode":420}},
			{"name":"p","projected":{"defaultMode":420,"sources":[{"serviceAccountToken":{"path":"token","expirationSeconds":3600}},
				{"downwardAPI":{"items":[{"path":"n","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}}]}},{"configMap":{"name":"ca"}}]}},
			{"name":"h","hostPath":{"path":"/tmp","type":""}},
			{"name":"e","ephemeral":{"volumeClaimTemplate":{"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}},"volumeMode":"Filesystem"}}}},
			{"name":"i","image":{"reference":"quay.io/x/y","pullPolicy":"Always"}},
			{"name":"iscsi","iscsi":{"targetPortal":"t","iqn":"q","lun":0,"iscsiInterface":"default"}},
			{"name":"rbd","rbd":{"monitors":["m"],"image":"i","pool":"rbd","user":"admin","keyring":"/etc/ceph/keyring"}},
			{"name":"az","azureDisk":{"diskName":"d","diskURI":"u","cachingMode":"ReadWrite","fsType":"ext4","readOnly":false,"kind":"Shared"}},
			{"name":"sio","scaleIO":{"gateway":"g","system":"s","secretRef":null,"storageMode":"ThinProvisioned","fsType":"xfs"}},
			{"name":"pvc","persistentVolumeClaim":{"claimName":"c"}}]}}`,
	}, {
		name: "pod-level requests from limits and containers",
		in: `{"spec":{"resources":{"limits":{"cpu":"2","memory":"1Gi"}},
			"containers":[{"name":"c","image":"nginx:1","resources":{"requests":{"cpu":"500m"}}}]}}`,
		want: `{"spec":{` + podSpecDefaults + `,"enableServiceLinks":true,
			"resources":{"limits":{"cpu":"2","memory":"1Gi"},"requests":{"cpu":"500m","memory":"1Gi"}},
			"containers":[{"name":"c","image":"nginx:1","imagePullPolicy":"IfNotPresent",` + containerDefaults + `,
				"resources":{"requests":{"cpu":"500m"}}}]}}`,
	}, {
		name: "pod-level limits from containers",
		in: `{"spec":{"resources":{"requests":{"cpu":"1"}},
			"initContainers":[{"name":"sidecar","image":"s:1","restartPolicy":"Always","resources":{"limits":{"cpu":"250m"}}}],
			"containers":[{"name":"a","image":"a:1","resources":{"limits":{"cpu":"1","memory":"1Gi"}}},
				{"name":"b","image":"b:1","resources":{"limits":{"cpu":"500m"}}}]}}`,
		want: `{"spec":{` + podSpecDefaults + `,"enableServiceLinks":true,
			"resources":{"requests":{"cpu":"1"},"limits":{"cpu":"1750m"}},
			"initContainers":[{"name":"sidecar","image":"s:1","restartPolicy":"Always","imagePullPolicy":"IfNotPresent",` + containerDefaults + `,
				"resources":{"limits":{"cpu":"250m"},"requests":{"cpu":"250m"}}}],
			"containers":[{"name":"a","image":"a:1","imagePullPolicy":"IfNotPresent",` + containerDefaults + `,
				"resources":{"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"1","memory":"1Gi"}}},
				{"name":"b","image":"b:1","imagePullPolicy":"IfNotPresent",` + containerDefaults + `,
				"resources":{"limits":{"cpu":"500m"},"requests":{"cpu":"500m"}}}]}}`,
	}})
}

func TestPodTemplate(t *testing.T) {
	// A template gets the PodSpec defaults but not those only a Pod gets:
	// no enableServiceLinks, no requests from limits, no host ports.
	runCases(t, &corev1.PodTemplate{}, []applyCase{{
		name: "template",
		in: `{"template":{"metadata":{"labels":{"a":"b"}},"spec":{"hostNetwork":true,
			"containers":[{"name":"c","image":"nginx","ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1"}}}]}}}`,
		want: `{"template":{"metadata":{"labels":{"a":"b"}},"spec":{"hostNetwork":true,` + podSpecDefaults + `,
			"containers":[{"name":"c","image":"nginx","imagePullPolicy":"Always",` + containerDefaults + `,
				"ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{"limits":{"cpu":"1"}}}]}}}`,
	}})
}

func TestPullPolicy(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	f := func(image string, want corev1.PullPolicy) {
		t.Helper()
		if got := pullPolicy(image); got != want {
			t.Errorf("pullPolicy(%q) = %s, want %s", image, got, want)
		}
	}
	f("nginx", corev1.PullAlways)
	f("nginx:latest", corev1.PullAlways)
	f("library/nginx", corev1.PullAlways)
	f("docker.io/library/nginx", corev1.PullAlways)
	f("nginx:1.25", corev1.PullIfNotPresent)
	f("nginx:LATEST", corev1.PullIfNotPresent)
	f("nginx@"+digest, corev1.PullIfNotPresent)
	f("nginx:latest@"+digest, corev1.PullAlways)
	f("localhost:5000/app", corev1.PullAlways)
	f("localhost/app", corev1.PullAlways)
	f("localhost:5000/app:v1", corev1.PullIfNotPresent)
	f("[::1]:5000/app", corev1.PullAlways)
	f("Registry.Example.com/team/app", corev1.PullAlways)
	f("Team/app", corev1.PullAlways) // an upper-case first component is a registry
	f("registry.k8s.io/pause:3.9", corev1.PullIfNotPresent)
	f("a/b/c:tag", corev1.PullIfNotPresent)
	// References that do not parse get IfNotPresent.
	f("", corev1.PullIfNotPresent)
	f("NGINX", corev1.PullIfNotPresent)
	f("nginx:", corev1.PullIfNotPresent)
	f("nginx@sha256:abc", corev1.PullIfNotPresent)
	f(strings.Repeat("0123456789abcdef", 4), corev1.PullIfNotPresent)
	f("x/"+strings.Repeat("a", 300), corev1.PullIfNotPresent)
}

func TestNoVolumeSourceCoversEveryField(t *testing.T) {
	typ := reflect.TypeFor[corev1.VolumeSource]()
	for i := range typ.NumField() {
		field := typ.Field(i)
		if field.Type.Kind() != reflect.Pointer {
			t.Errorf("VolumeSource.%s is not a pointer", field.Name)
			continue
		}
		var src corev1.VolumeSource
		reflect.ValueOf(&src).Elem().Field(i).Set(reflect.New(field.Type.Elem()))
		if noVolumeSource(&src) {
			t.Errorf("noVolumeSource ignores VolumeSource.%s", field.Name)
		}
	}
	if !noVolumeSource(&corev1.VolumeSource{}) {
		t.Error("noVolumeSource(empty) = false")
	}
}
