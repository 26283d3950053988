package defaults

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// HorizontalPodAutoscaler defaults of autoscaling/v2.
const (
	defaultCPUUtilization  int32 = 80
	scaleUpPercent         int32 = 100
	scaleUpPods            int32 = 4
	scaleUpPeriodSeconds   int32 = 15
	scaleUpStabilization   int32 = 0
	scaleDownPercent       int32 = 100
	scaleDownPeriodSeconds int32 = 15
)

// horizontalPodAutoscaler sets minReplicas 1, a CPU utilization target of
// 80% when no metric is given, and completes the scaling rules of a
// behavior that is set.
func horizontalPodAutoscaler(h *autoscalingv2.HorizontalPodAutoscaler) {
	s := &h.Spec
	if s.MinReplicas == nil {
		s.MinReplicas = new(int32(1))
	}
	if len(s.Metrics) == 0 {
		s.Metrics = []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{
					Type:               autoscalingv2.UtilizationMetricType,
					AverageUtilization: new(defaultCPUUtilization),
				},
			},
		}}
	}
	if b := s.Behavior; b != nil {
		b.ScaleUp = scalingRules(b.ScaleUp, autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: new(scaleUpStabilization),
			SelectPolicy:               new(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PodsScalingPolicy, Value: scaleUpPods, PeriodSeconds: scaleUpPeriodSeconds},
				{Type: autoscalingv2.PercentScalingPolicy, Value: scaleUpPercent, PeriodSeconds: scaleUpPeriodSeconds},
			},
		})
		// The scale-down stabilization window stays unset: the controller
		// uses its own flag (5 minutes by default) then.
		b.ScaleDown = scalingRules(b.ScaleDown, autoscalingv2.HPAScalingRules{
			SelectPolicy: new(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PercentScalingPolicy, Value: scaleDownPercent, PeriodSeconds: scaleDownPeriodSeconds},
			},
		})
	}
}

// scalingRules returns def with the fields set in r.
func scalingRules(r *autoscalingv2.HPAScalingRules, def autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if r == nil {
		return &def
	}
	if r.SelectPolicy != nil {
		def.SelectPolicy = r.SelectPolicy
	}
	if r.StabilizationWindowSeconds != nil {
		def.StabilizationWindowSeconds = r.StabilizationWindowSeconds
	}
	if r.Policies != nil {
		def.Policies = r.Policies
	}
	if r.Tolerance != nil {
		def.Tolerance = r.Tolerance
	}
	return &def
}
