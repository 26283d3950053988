package defaults

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// template is a pod template as clients send it and templateDefaulted the
// same as stored.
const (
	template          = `{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"nginx:1.25"}]}}`
	templateDefaulted = `{"metadata":{"labels":{"app":"a"}},"spec":{` + podSpecDefaults + `,
		"containers":[{"name":"c","image":"nginx:1.25","imagePullPolicy":"IfNotPresent",` + containerDefaults + `}]}}`
	selector = `{"matchLabels":{"app":"a"}}`
)

func TestDeployment(t *testing.T) {
	runCases(t, &appsv1.Deployment{}, []applyCase{{
		name: "minimal",
		in:   `{"spec":{"selector":` + selector + `,"template":` + template + `}}`,
		want: `{"spec":{"replicas":1,"selector":` + selector + `,"template":` + templateDefaulted + `,
			"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%","maxSurge":"25%"}},
			"revisionHistoryLimit":10,"progressDeadlineSeconds":600}}`,
	}, {
		name: "partial rolling update",
		in:   `{"spec":{"replicas":0,"strategy":{"rollingUpdate":{"maxSurge":1}},"revisionHistoryLimit":0,"selector":` + selector + `,"template":` + template + `}}`,
		want: `{"spec":{"replicas":0,"selector":` + selector + `,"template":` + templateDefaulted + `,
			"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%","maxSurge":1}},
			"revisionHistoryLimit":0,"progressDeadlineSeconds":600}}`,
	}, {
		name: "recreate",
		in:   `{"spec":{"strategy":{"type":"Recreate"},"selector":` + selector + `,"template":` + template + `}}`,
		want: `{"spec":{"replicas":1,"selector":` + selector + `,"template":` + templateDefaulted + `,
			"strategy":{"type":"Recreate"},"revisionHistoryLimit":10,"progressDeadlineSeconds":600}}`,
	}})
}

func TestReplicaSet(t *testing.T) {
	runCases(t, &appsv1.ReplicaSet{}, []applyCase{{
		name: "minimal",
		in:   `{"spec":{"selector":` + selector + `,"template":` + template + `}}`,
		want: `{"spec":{"replicas":1,"selector":` + selector + `,"template":` + templateDefaulted + `}}`,
	}})
}

func TestStatefulSet(t *testing.T) {
	runCases(t, &appsv1.StatefulSet{}, []applyCase{{
		name: "minimal",
		in: `{"spec":{"serviceName":"s","selector":` + selector + `,"template":` + template + `,
			"volumeClaimTemplates":[{"metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}]}}`,
		want: `{"spec":{"replicas":1,"serviceName":"s","selector":` + selector + `,"template":` + templateDefaulted + `,
			"volumeClaimTemplates":[{"metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}},
				"volumeMode":"Filesystem"},"status":{"phase":"Pending"}}],
			"podManagementPolicy":"OrderedReady","updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":0,"maxUnavailable":1}},
			"revisionHistoryLimit":10,"persistentVolumeClaimRetentionPolicy":{"whenDeleted":"Retain","whenScaled":"Retain"}}}`,
	}, {
		name: "on delete",
		in: `{"spec":{"serviceName":"s","updateStrategy":{"type":"OnDelete"},"podManagementPolicy":"Parallel",
			"persistentVolumeClaimRetentionPolicy":{"whenDeleted":"Delete"},"selector":` + selector + `,"template":` + template + `}}`,
		want: `{"spec":{"replicas":1,"serviceName":"s","selector":` + selector + `,"template":` + templateDefaulted + `,
			"podManagementPolicy":"Parallel","updateStrategy":{"type":"OnDelete"},
			"revisionHistoryLimit":10,"persistentVolumeClaimRetentionPolicy":{"whenDeleted":"Delete","whenScaled":"Retain"}}}`,
	}, {
		// An explicit RollingUpdate type without parameters stays so.
		name: "rolling update type only",
		in:   `{"spec":{"serviceName":"s","updateStrategy":{"type":"RollingUpdate"},"selector":` + selector + `,"template":` + template + `}}`,
		want: `{"spec":{"replicas":1,"serviceName":"s","selector":` + selector + `,"template":` + templateDefaulted + `,
			"podManagementPolicy":"OrderedReady","updateStrategy":{"type":"RollingUpdate"},
			"revisionHistoryLimit":10,"persistentVolumeClaimRetentionPolicy":{"whenDeleted":"Retain","whenScaled":"Retain"}}}`,
	}})
}

func TestDaemonSet(t *testing.T) {
	runCases(t, &appsv1.DaemonSet{}, []applyCase{{
		name: "minimal",
		in:   `{"spec":{"selector":` + selector + `,"template":` + template + `}}`,
		want: `{"spec":{"selector":` + selector + `,"template":` + templateDefaulted + `,
			"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1,"maxSurge":0}},"revisionHistoryLimit":10}}`,
	}, {
		name: "on delete",
		in:   `{"spec":{"updateStrategy":{"type":"OnDelete"},"selector":` + selector + `,"template":` + template + `}}`,
		want: `{"spec":{"selector":` + selector + `,"template":` + templateDefaulted + `,
			"updateStrategy":{"type":"OnDelete"},"revisionHistoryLimit":10}}`,
	}})
}

func TestReplicationController(t *testing.T) {
	runCases(t, &corev1.ReplicationController{}, []applyCase{{
		name: "selector and labels from template",
		in:   `{"spec":{"template":` + template + `}}`,
		want: `{"metadata":{"labels":{"app":"a"}},"spec":{"replicas":1,"selector":{"app":"a"},"template":` + templateDefaulted + `}}`,
	}, {
		name: "kept",
		in:   `{"metadata":{"labels":{"x":"y"}},"spec":{"replicas":3,"selector":{"app":"a"},"template":` + template + `}}`,
		want: `{"metadata":{"labels":{"x":"y"}},"spec":{"replicas":3,"selector":{"app":"a"},"template":` + templateDefaulted + `}}`,
	}})
}

func TestJob(t *testing.T) {
	const jobTemplate = `{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}`
	const jobTemplateDefaulted = `{"spec":{"restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",
		"securityContext":{},"schedulerName":"default-scheduler",
		"containers":[{"name":"c","image":"busybox","imagePullPolicy":"Always",` + containerDefaults + `}]}}`
	runCases(t, &batchv1.Job{}, []applyCase{{
		name: "minimal",
		in:   `{"spec":{"template":` + jobTemplate + `}}`,
		want: `{"spec":{"parallelism":1,"completions":1,"backoffLimit":6,"manualSelector":false,"template":` + jobTemplateDefaulted + `,
			"completionMode":"NonIndexed","suspend":false,"podReplacementPolicy":"TerminatingOrFailed"}}`,
	}, {
		name: "parallel",
		in:   `{"spec":{"parallelism":5,"template":` + jobTemplate + `}}`,
		want: `{"spec":{"parallelism":5,"backoffLimit":6,"manualSelector":false,"template":` + jobTemplateDefaulted + `,
			"completionMode":"NonIndexed","suspend":false,"podReplacementPolicy":"TerminatingOrFailed"}}`,
	}, {
		name: "indexed with failure policy",
		in: `{"metadata":{"labels":{"own":"x"}},"spec":{"completions":3,"completionMode":"Indexed","backoffLimitPerIndex":1,
			"podFailurePolicy":{"rules":[{"action":"Ignore","onPodConditions":[{"type":"DisruptionTarget"}]}]},
			"template":{"metadata":{"labels":{"app":"j"}},"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}`,
		want: `{"metadata":{"labels":{"own":"x"}},"spec":{"completions":3,"parallelism":1,"backoffLimit":2147483647,"backoffLimitPerIndex":1,
			"manualSelector":false,"completionMode":"Indexed","suspend":false,"podReplacementPolicy":"Failed",
			"podFailurePolicy":{"rules":[{"action":"Ignore","onPodConditions":[{"type":"DisruptionTarget","status":"True"}]}]},
			"template":{"metadata":{"labels":{"app":"j"}},"spec":{"restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",
				"securityContext":{},"schedulerName":"default-scheduler",
				"containers":[{"name":"c","image":"busybox","imagePullPolicy":"Always",` + containerDefaults + `}]}}}}`,
	}, {
		name: "labels from template",
		in:   `{"spec":{"template":{"metadata":{"labels":{"app":"j"}},"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}`,
		want: `{"metadata":{"labels":{"app":"j"}},"spec":{"parallelism":1,"completions":1,"backoffLimit":6,"manualSelector":false,
			"completionMode":"NonIndexed","suspend":false,"podReplacementPolicy":"TerminatingOrFailed",
			"template":{"metadata":{"labels":{"app":"j"}},"spec":{"restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",
				"securityContext":{},"schedulerName":"default-scheduler",
				"containers":[{"name":"c","image":"busybox","imagePullPolicy":"Always",` + containerDefaults + `}]}}}}`,
	}})
}

func TestCronJob(t *testing.T) {
	// The job template gets the pod defaults but not the Job defaults.
	runCases(t, &batchv1.CronJob{}, []applyCase{{
		name: "minimal",
		in:   `{"spec":{"schedule":"* * * * *","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"OnFailure","containers":[{"name":"c","image":"busybox:1"}]}}}}}}`,
		want: `{"spec":{"schedule":"* * * * *","concurrencyPolicy":"Allow","suspend":false,"successfulJobsHistoryLimit":3,"failedJobsHistoryLimit":1,
			"jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"OnFailure","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",
				"securityContext":{},"schedulerName":"default-scheduler",
				"containers":[{"name":"c","image":"busybox:1","imagePullPolicy":"IfNotPresent",` + containerDefaults + `}]}}}}}}`,
	}})
}
