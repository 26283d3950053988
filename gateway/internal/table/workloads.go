package table

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Printers of workload resources: apps, batch, autoscaling, policy.

func deploymentPrinter() printer {
	status := appsv1.DeploymentStatus{}.SwaggerDoc()
	columns := append([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Ready", "string", "Number of the pod with ready state"),
		column("Up-to-date", "string", status["updatedReplicas"]),
		column("Available", "string", status["availableReplicas"]),
		ageColumn(),
	}, append(containersColumns(), wideColumn("Selector", "string", appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]))...)
	return typed(columns, func(obj *appsv1.Deployment, now time.Time) []any {
		selector := "<invalid>"
		if s, err := metav1.LabelSelectorAsSelector(obj.Spec.Selector); err == nil {
			selector = s.String()
		}
		names, images := layoutContainers(obj.Spec.Template.Spec.Containers)
		return []any{obj.Name, fmt.Sprintf("%d/%d", obj.Status.ReadyReplicas, deref(obj.Spec.Replicas)),
			int64(obj.Status.UpdatedReplicas), int64(obj.Status.AvailableReplicas), age(obj.CreationTimestamp, now),
			names, images, selector}
	})
}

func replicaSetPrinter() printer {
	columns := append([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Desired", "integer", appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]),
		column("Current", "integer", appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]),
		column("Ready", "integer", appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]),
		ageColumn(),
	}, append(containersColumns(), wideColumn("Selector", "string", appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]))...)
	return typed(columns, func(obj *appsv1.ReplicaSet, now time.Time) []any {
		names, images := layoutContainers(obj.Spec.Template.Spec.Containers)
		return []any{obj.Name, int64(deref(obj.Spec.Replicas)), int64(obj.Status.Replicas), int64(obj.Status.ReadyReplicas), age(obj.CreationTimestamp, now),
			names, images, metav1.FormatLabelSelector(obj.Spec.Selector)}
	})
}

func daemonSetPrinter() printer {
	status := appsv1.DaemonSetStatus{}.SwaggerDoc()
	columns := append([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Desired", "integer", status["desiredNumberScheduled"]),
		column("Current", "integer", status["currentNumberScheduled"]),
		column("Ready", "integer", status["numberReady"]),
		column("Up-to-date", "integer", status["updatedNumberScheduled"]),
		column("Available", "integer", status["numberAvailable"]),
		column("Node Selector", "string", corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
		ageColumn(),
	}, append(containersColumns(), wideColumn("Selector", "string", appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]))...)
	return typed(columns, func(obj *appsv1.DaemonSet, now time.Time) []any {
		s := obj.Status
		names, images := layoutContainers(obj.Spec.Template.Spec.Containers)
		return []any{obj.Name, int64(s.DesiredNumberScheduled), int64(s.CurrentNumberScheduled), int64(s.NumberReady),
			int64(s.UpdatedNumberScheduled), int64(s.NumberAvailable), labels.FormatLabels(obj.Spec.Template.Spec.NodeSelector),
			age(obj.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(obj.Spec.Selector)}
	})
}

func statefulSetPrinter() printer {
	columns := append([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Ready", "string", "Number of the pod with ready state"),
		ageColumn(),
	}, containersColumns()...)
	return typed(columns, func(obj *appsv1.StatefulSet, now time.Time) []any {
		names, images := layoutContainers(obj.Spec.Template.Spec.Containers)
		return []any{obj.Name, fmt.Sprintf("%d/%d", obj.Status.ReadyReplicas, deref(obj.Spec.Replicas)), age(obj.CreationTimestamp, now), names, images}
	})
}

func controllerRevisionPrinter() printer {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Controller", "string", "Controller of the object"),
		column("Revision", "string", appsv1.ControllerRevision{}.SwaggerDoc()["revision"]),
		ageColumn(),
	}
	return typed(columns, func(obj *appsv1.ControllerRevision, now time.Time) []any {
		controller := "<none>"
		if ref := metav1.GetControllerOf(obj); ref != nil {
			controller = ref.Name
			if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil {
				if gk := gv.WithKind(ref.Kind).GroupKind(); !gk.Empty() {
					controller = strings.ToLower(gk.String()) + "/" + ref.Name
				}
			}
		}
		return []any{obj.Name, controller, obj.Revision, age(obj.CreationTimestamp, now)}
	})
}

func jobPrinter() printer {
	columns := append([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Status", "string", "Status of the job."),
		column("Completions", "string", batchv1.JobStatus{}.SwaggerDoc()["succeeded"]),
		column("Duration", "string", "Time required to complete the job."),
		ageColumn(),
	}, append(containersColumns(), wideColumn("Selector", "string", batchv1.JobSpec{}.SwaggerDoc()["selector"]))...)
	return typed(columns, func(obj *batchv1.Job, now time.Time) []any {
		var completions string
		switch parallelism := deref(obj.Spec.Parallelism); {
		case obj.Spec.Completions != nil:
			completions = fmt.Sprintf("%d/%d", obj.Status.Succeeded, *obj.Spec.Completions)
		case parallelism > 1:
			completions = fmt.Sprintf("%d/1 of %d", obj.Status.Succeeded, parallelism)
		default:
			completions = fmt.Sprintf("%d/1", obj.Status.Succeeded)
		}
		var jobDuration string
		switch {
		case obj.Status.StartTime == nil:
		case obj.Status.CompletionTime == nil:
			jobDuration = duration.HumanDuration(now.Sub(obj.Status.StartTime.Time))
		default:
			jobDuration = duration.HumanDuration(obj.Status.CompletionTime.Sub(obj.Status.StartTime.Time))
		}
		status := "Running"
		switch {
		case jobCondition(obj, batchv1.JobComplete):
			status = "Complete"
		case jobCondition(obj, batchv1.JobFailed):
			status = "Failed"
		case obj.DeletionTimestamp != nil:
			status = "Terminating"
		case jobCondition(obj, batchv1.JobSuspended):
			status = "Suspended"
		case jobCondition(obj, batchv1.JobFailureTarget):
			status = "FailureTarget"
		}
		names, images := layoutContainers(obj.Spec.Template.Spec.Containers)
		return []any{obj.Name, status, completions, jobDuration, age(obj.CreationTimestamp, now),
			names, images, metav1.FormatLabelSelector(obj.Spec.Selector)}
	})
}

// jobCondition reports whether the first condition of type typ is true.
func jobCondition(job *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func cronJobPrinter() printer {
	spec := batchv1.CronJobSpec{}.SwaggerDoc()
	columns := append([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Schedule", "string", spec["schedule"]),
		column("Timezone", "string", spec["timeZone"]),
		column("Suspend", "boolean", spec["suspend"]),
		column("Active", "integer", batchv1.CronJobStatus{}.SwaggerDoc()["active"]),
		column("Last Schedule", "string", batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]),
		ageColumn(),
	}, append(containersColumns(), wideColumn("Selector", "string", batchv1.JobSpec{}.SwaggerDoc()["selector"]))...)
	return typed(columns, func(obj *batchv1.CronJob, now time.Time) []any {
		last := "<none>"
		if obj.Status.LastScheduleTime != nil {
			last = age(*obj.Status.LastScheduleTime, now)
		}
		tz := "<none>"
		if obj.Spec.TimeZone != nil {
			tz = *obj.Spec.TimeZone
		}
		job := obj.Spec.JobTemplate.Spec
		names, images := layoutContainers(job.Template.Spec.Containers)
		return []any{obj.Name, obj.Spec.Schedule, tz, printBoolPtr(obj.Spec.Suspend), int64(len(obj.Status.Active)), last,
			age(obj.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(job.Selector)}
	})
}

func horizontalPodAutoscalerPrinter() printer {
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Reference", "string", spec["scaleTargetRef"]),
		column("Targets", "string", spec["metrics"]),
		column("MinPods", "string", spec["minReplicas"]),
		column("MaxPods", "string", spec["maxReplicas"]),
		column("Replicas", "string", autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"]),
		ageColumn(),
	}
	return typed(columns, func(obj *autoscalingv2.HorizontalPodAutoscaler, now time.Time) []any {
		minPods := "<unset>"
		if obj.Spec.MinReplicas != nil {
			minPods = fmt.Sprintf("%d", *obj.Spec.MinReplicas)
		}
		reference := obj.Spec.ScaleTargetRef.Kind + "/" + obj.Spec.ScaleTargetRef.Name
		return []any{obj.Name, reference, hpaMetrics(obj.Spec.Metrics, obj.Status.CurrentMetrics), minPods,
			int64(obj.Spec.MaxReplicas), int64(obj.Status.CurrentReplicas), age(obj.CreationTimestamp, now)}
	})
}

// hpaMetrics is kube-apiserver's formatHPAMetrics: "current/target" per
// metric, at most two, then "+ N more...".
func hpaMetrics(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	const max = 2
	var list []string
	for i, spec := range specs {
		var status *autoscalingv2.MetricStatus
		if len(statuses) > i {
			status = &statuses[i]
		}
		list = append(list, hpaMetric(spec, status))
	}
	count := len(list)
	if count > max {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:max], ", "), count-max)
	}
	return strings.Join(list, ", ")
}

func hpaMetric(spec autoscalingv2.MetricSpec, status *autoscalingv2.MetricStatus) string {
	current := "<unknown>"
	switch spec.Type {
	case autoscalingv2.ExternalMetricSourceType:
		if spec.External.Target.AverageValue != nil {
			if status != nil && status.External != nil && status.External.Current.AverageValue != nil {
				current = status.External.Current.AverageValue.String()
			}
			return fmt.Sprintf("%s/%s (avg)", current, spec.External.Target.AverageValue.String())
		}
		if status != nil && status.External != nil {
			current = status.External.Current.Value.String()
		}
		return fmt.Sprintf("%s/%s", current, spec.External.Target.Value.String())
	case autoscalingv2.PodsMetricSourceType:
		if status != nil && status.Pods != nil {
			current = status.Pods.Current.AverageValue.String()
		}
		return fmt.Sprintf("%s/%s", current, spec.Pods.Target.AverageValue.String())
	case autoscalingv2.ObjectMetricSourceType:
		if spec.Object.Target.AverageValue != nil {
			if status != nil && status.Object != nil && status.Object.Current.AverageValue != nil {
				current = status.Object.Current.AverageValue.String()
			}
			return fmt.Sprintf("%s/%s (avg)", current, spec.Object.Target.AverageValue.String())
		}
		if status != nil && status.Object != nil {
			current = status.Object.Current.Value.String()
		}
		return fmt.Sprintf("%s/%s", current, spec.Object.Target.Value.String())
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource.Target.AverageValue != nil {
			if status != nil && status.Resource != nil {
				current = status.Resource.Current.AverageValue.String()
			}
			return fmt.Sprintf("%s: %s/%s", spec.Resource.Name.String(), current, spec.Resource.Target.AverageValue.String())
		}
		if status != nil && status.Resource != nil && status.Resource.Current.AverageUtilization != nil {
			current = fmt.Sprintf("%d%%", *status.Resource.Current.AverageUtilization)
		}
		target := "<auto>"
		if spec.Resource.Target.AverageUtilization != nil {
			target = fmt.Sprintf("%d%%", *spec.Resource.Target.AverageUtilization)
		}
		return fmt.Sprintf("%s: %s/%s", spec.Resource.Name.String(), current, target)
	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource.Target.AverageValue != nil {
			if status != nil && status.ContainerResource != nil {
				current = status.ContainerResource.Current.AverageValue.String()
			}
			return fmt.Sprintf("%s: %s/%s", spec.ContainerResource.Name.String(), current, spec.ContainerResource.Target.AverageValue.String())
		}
		if status != nil && status.ContainerResource != nil && status.ContainerResource.Current.AverageUtilization != nil {
			current = fmt.Sprintf("%d%%", *status.ContainerResource.Current.AverageUtilization)
		}
		target := "<auto>"
		if spec.ContainerResource.Target.AverageUtilization != nil {
			target = fmt.Sprintf("%d%%", *spec.ContainerResource.Target.AverageUtilization)
		}
		return fmt.Sprintf("%s: %s/%s", spec.ContainerResource.Name.String(), current, target)
	}
	return "<unknown type>"
}

func podDisruptionBudgetPrinter() printer {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Min Available", "string", "The minimum number of pods that must be available."),
		column("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
		column("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
		ageColumn(),
	}
	return typed(columns, func(obj *policyv1.PodDisruptionBudget, now time.Time) []any {
		minAvailable, maxUnavailable := "N/A", "N/A"
		if obj.Spec.MinAvailable != nil {
			minAvailable = obj.Spec.MinAvailable.String()
		}
		if obj.Spec.MaxUnavailable != nil {
			maxUnavailable = obj.Spec.MaxUnavailable.String()
		}
		return []any{obj.Name, minAvailable, maxUnavailable, int64(obj.Status.DisruptionsAllowed), age(obj.CreationTimestamp, now)}
	})
}
