package defaults

import (
	"maps"
	"math"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Workload defaults of apps/v1 and batch/v1.
const (
	revisionHistoryLimit    = 10
	progressDeadlineSeconds = 600
	jobBackoffLimit         = 6
	successfulJobsHistory   = 3
	failedJobsHistory       = 1
)

func deployment(d *appsv1.Deployment) {
	s := &d.Spec
	if s.Replicas == nil {
		s.Replicas = new(int32(1))
	}
	if s.Strategy.Type == "" {
		s.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.Strategy.RollingUpdate == nil {
			s.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		ru := s.Strategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = new(intstr.FromString("25%"))
		}
		if ru.MaxSurge == nil {
			ru.MaxSurge = new(intstr.FromString("25%"))
		}
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = new(int32(revisionHistoryLimit))
	}
	if s.ProgressDeadlineSeconds == nil {
		s.ProgressDeadlineSeconds = new(int32(progressDeadlineSeconds))
	}
	podSpec(&s.Template.Spec)
}

func replicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = new(int32(1))
	}
	podSpec(&rs.Spec.Template.Spec)
}

func daemonSet(ds *appsv1.DaemonSet) {
	us := &ds.Spec.UpdateStrategy
	if us.Type == "" {
		us.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if us.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if us.RollingUpdate == nil {
			us.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if us.RollingUpdate.MaxUnavailable == nil {
			us.RollingUpdate.MaxUnavailable = new(intstr.FromInt32(1))
		}
		if us.RollingUpdate.MaxSurge == nil {
			us.RollingUpdate.MaxSurge = new(intstr.FromInt32(0))
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = new(int32(revisionHistoryLimit))
	}
	podSpec(&ds.Spec.Template.Spec)
}

// statefulSet applies SetDefaults_StatefulSet with MaxUnavailableStatefulSet
// (beta, on by default since v1.35) and StatefulSetAutoDeletePVC (GA) on.
func statefulSet(ss *appsv1.StatefulSet) {
	s := &ss.Spec
	if s.PodManagementPolicy == "" {
		s.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.UpdateStrategy.Type == "" {
		s.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if ru := s.UpdateStrategy.RollingUpdate; s.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil {
		if ru.Partition == nil {
			ru.Partition = new(int32(0))
		}
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = new(intstr.FromInt32(1))
		}
	}
	if s.PersistentVolumeClaimRetentionPolicy == nil {
		s.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p := s.PersistentVolumeClaimRetentionPolicy; p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if s.Replicas == nil {
		s.Replicas = new(int32(1))
	}
	if s.RevisionHistoryLimit == nil {
		s.RevisionHistoryLimit = new(int32(revisionHistoryLimit))
	}
	podSpec(&s.Template.Spec)
	for i := range s.VolumeClaimTemplates {
		persistentVolumeClaim(&s.VolumeClaimTemplates[i])
	}
}

// job applies SetDefaults_Job with JobPodReplacementPolicy and
// JobBackoffLimitPerIndex (both GA) on.
func job(j *batchv1.Job) {
	s := &j.Spec
	if s.Completions == nil && s.Parallelism == nil {
		s.Completions = new(int32(1))
	}
	if s.Parallelism == nil {
		s.Parallelism = new(int32(1))
	}
	if s.BackoffLimit == nil {
		if s.BackoffLimitPerIndex != nil {
			s.BackoffLimit = new(int32(math.MaxInt32))
		} else {
			s.BackoffLimit = new(int32(jobBackoffLimit))
		}
	}
	if l := s.Template.Labels; l != nil && len(j.Labels) == 0 {
		j.Labels = maps.Clone(l)
	}
	if s.CompletionMode == nil {
		s.CompletionMode = new(batchv1.NonIndexedCompletion)
	}
	if s.Suspend == nil {
		s.Suspend = new(false)
	}
	if s.PodReplacementPolicy == nil {
		if s.PodFailurePolicy != nil {
			s.PodReplacementPolicy = new(batchv1.Failed)
		} else {
			s.PodReplacementPolicy = new(batchv1.TerminatingOrFailed)
		}
	}
	if s.ManualSelector == nil {
		s.ManualSelector = new(false)
	}
	jobTemplate(s)
}

// cronJob applies SetDefaults_CronJob. The job template gets the defaults
// of its nested structs only, not those of a Job.
func cronJob(cj *batchv1.CronJob) {
	s := &cj.Spec
	if s.ConcurrencyPolicy == "" {
		s.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if s.Suspend == nil {
		s.Suspend = new(false)
	}
	if s.SuccessfulJobsHistoryLimit == nil {
		s.SuccessfulJobsHistoryLimit = new(int32(successfulJobsHistory))
	}
	if s.FailedJobsHistoryLimit == nil {
		s.FailedJobsHistoryLimit = new(int32(failedJobsHistory))
	}
	jobTemplate(&s.JobTemplate.Spec)
}

// jobTemplate applies the defaults of the structs nested in a JobSpec.
func jobTemplate(s *batchv1.JobSpec) {
	if p := s.PodFailurePolicy; p != nil {
		for i := range p.Rules {
			for k := range p.Rules[i].OnPodConditions {
				c := &p.Rules[i].OnPodConditions[k]
				if c.Status == "" {
					c.Status = corev1.ConditionTrue
				}
			}
		}
	}
	podSpec(&s.Template.Spec)
}
