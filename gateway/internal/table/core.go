package table

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Printers of the core group's resources.

func podPrinter() printer {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
		column("Status", "string", "The aggregate status of the containers in this pod."),
		column("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
		ageColumn(),
		wideColumn("IP", "string", corev1.PodStatus{}.SwaggerDoc()["podIP"]),
		wideColumn("Node", "string", corev1.PodSpec{}.SwaggerDoc()["nodeName"]),
		wideColumn("Nominated Node", "string", corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]),
		wideColumn("Readiness Gates", "string", corev1.PodSpec{}.SwaggerDoc()["readinessGates"]),
	}
	return printer{columns: columns, row: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %T, want *v1.Pod", ErrObjectType, obj)
		}
		var conditions []metav1.TableRowCondition
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			conditions = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
		case corev1.PodFailed:
			conditions = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
		}
		return podCells(pod, now), conditions, nil
	}}
}

func isRestartableInitContainer(c *corev1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// podCells is kube-apiserver's printPod.
func podCells(pod *corev1.Pod, now time.Time) []any {
	restarts := 0
	restartableInitRestarts := 0
	totalContainers := len(pod.Spec.Containers)
	readyContainers := 0
	var lastRestart, lastRestartableInitRestart metav1.Time

	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}

	initContainers := make(map[string]*corev1.Container, len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		initContainers[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
		if isRestartableInitContainer(&pod.Spec.InitContainers[i]) {
			totalContainers++
		}
	}

	initializing := false
	for i := range pod.Status.InitContainerStatuses {
		container := pod.Status.InitContainerStatuses[i]
		restarts += int(container.RestartCount)
		if t := container.LastTerminationState.Terminated; t != nil && lastRestart.Before(&t.FinishedAt) {
			lastRestart = t.FinishedAt
		}
		restartable := isRestartableInitContainer(initContainers[container.Name])
		if restartable {
			restartableInitRestarts += int(container.RestartCount)
			if t := container.LastTerminationState.Terminated; t != nil && lastRestartableInitRestart.Before(&t.FinishedAt) {
				lastRestartableInitRestart = t.FinishedAt
			}
		}
		switch {
		case container.State.Terminated != nil && container.State.Terminated.ExitCode == 0:
			continue
		case restartable && container.Started != nil && *container.Started:
			if container.Ready {
				readyContainers++
			}
			continue
		case container.State.Terminated != nil:
			if container.State.Terminated.Reason == "" {
				if container.State.Terminated.Signal != 0 {
					reason = fmt.Sprintf("Init:Signal:%d", container.State.Terminated.Signal)
				} else {
					reason = fmt.Sprintf("Init:ExitCode:%d", container.State.Terminated.ExitCode)
				}
			} else {
				reason = "Init:" + container.State.Terminated.Reason
			}
			initializing = true
		case container.State.Waiting != nil && container.State.Waiting.Reason != "" && container.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + container.State.Waiting.Reason
			initializing = true
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
			initializing = true
		}
		break
	}

	if !initializing || podInitialized(pod) {
		restarts = restartableInitRestarts
		lastRestart = lastRestartableInitRestart
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			container := pod.Status.ContainerStatuses[i]
			restarts += int(container.RestartCount)
			if t := container.LastTerminationState.Terminated; t != nil && lastRestart.Before(&t.FinishedAt) {
				lastRestart = t.FinishedAt
			}
			switch {
			case container.State.Waiting != nil && container.State.Waiting.Reason != "":
				reason = container.State.Waiting.Reason
			case container.State.Terminated != nil && container.State.Terminated.Reason != "":
				reason = container.State.Terminated.Reason
			case container.State.Terminated != nil:
				if container.State.Terminated.Signal != 0 {
					reason = fmt.Sprintf("Signal:%d", container.State.Terminated.Signal)
				} else {
					reason = fmt.Sprintf("ExitCode:%d", container.State.Terminated.ExitCode)
				}
			case container.Ready && container.State.Running != nil:
				hasRunning = true
				readyContainers++
			}
		}
		// A pod reported Completed with a container still running is
		// Running (or NotReady).
		if reason == "Completed" && hasRunning {
			if podReady(pod) {
				reason = "Running"
			} else {
				reason = "NotReady"
			}
		}
	}

	terminal := pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
	if pod.DeletionTimestamp != nil && pod.Status.Reason == "NodeLost" {
		reason = "Unknown"
	} else if pod.DeletionTimestamp != nil && !terminal {
		reason = "Terminating"
	}

	restartsText := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartsText = fmt.Sprintf("%d (%s ago)", restarts, age(lastRestart, now))
	}

	podIP, nodeName, nominated := "<none>", "<none>", "<none>"
	if len(pod.Status.PodIPs) > 0 && pod.Status.PodIPs[0].IP != "" {
		podIP = pod.Status.PodIPs[0].IP
	}
	if pod.Spec.NodeName != "" {
		nodeName = pod.Spec.NodeName
	}
	if pod.Status.NominatedNodeName != "" {
		nominated = pod.Status.NominatedNodeName
	}
	readinessGates := "<none>"
	if len(pod.Spec.ReadinessGates) > 0 {
		trueConditions := 0
		for _, gate := range pod.Spec.ReadinessGates {
			for _, c := range pod.Status.Conditions {
				if c.Type == gate.ConditionType {
					if c.Status == corev1.ConditionTrue {
						trueConditions++
					}
					break
				}
			}
		}
		readinessGates = fmt.Sprintf("%d/%d", trueConditions, len(pod.Spec.ReadinessGates))
	}
	return []any{pod.Name, fmt.Sprintf("%d/%d", readyContainers, totalContainers), reason, restartsText, age(pod.CreationTimestamp, now),
		podIP, nodeName, nominated, readinessGates}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func podInitialized(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodInitialized {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// layoutContainers joins container names and images with commas.
func layoutContainers(containers []corev1.Container) (names, images string) {
	n := make([]string, len(containers))
	im := make([]string, len(containers))
	for i, c := range containers {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

func podTemplatePrinter() printer {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Containers", "string", "Names of each container in the template."),
		column("Images", "string", "Images referenced by each container in the template."),
		column("Pod Labels", "string", "The labels for the pod template."),
	}
	return typed(columns, func(obj *corev1.PodTemplate, _ time.Time) []any {
		names, images := layoutContainers(obj.Template.Spec.Containers)
		return []any{obj.Name, names, images, labels.FormatLabels(obj.Template.Labels)}
	})
}

func replicationControllerPrinter() printer {
	columns := append([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Desired", "integer", corev1.ReplicationControllerSpec{}.SwaggerDoc()["replicas"]),
		column("Current", "integer", corev1.ReplicationControllerStatus{}.SwaggerDoc()["replicas"]),
		column("Ready", "integer", corev1.ReplicationControllerStatus{}.SwaggerDoc()["readyReplicas"]),
		ageColumn(),
	}, append(containersColumns(), wideColumn("Selector", "string", corev1.ReplicationControllerSpec{}.SwaggerDoc()["selector"]))...)
	return typed(columns, func(obj *corev1.ReplicationController, now time.Time) []any {
		var containers []corev1.Container
		if obj.Spec.Template != nil {
			containers = obj.Spec.Template.Spec.Containers
		}
		names, images := layoutContainers(containers)
		return []any{obj.Name, int64(deref(obj.Spec.Replicas)), int64(obj.Status.Replicas), int64(obj.Status.ReadyReplicas), age(obj.CreationTimestamp, now),
			names, images, labels.FormatLabels(obj.Spec.Selector)}
	})
}

func servicePrinter() printer {
	doc := corev1.ServiceSpec{}.SwaggerDoc()
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Type", "string", doc["type"]),
		column("Cluster-IP", "string", doc["clusterIP"]),
		column("External-IP", "string", doc["externalIPs"]),
		column("Port(s)", "string", doc["ports"]),
		ageColumn(),
		wideColumn("Selector", "string", doc["selector"]),
	}
	return typed(columns, func(obj *corev1.Service, now time.Time) []any {
		clusterIP := "<none>"
		if len(obj.Spec.ClusterIPs) > 0 {
			clusterIP = obj.Spec.ClusterIPs[0]
		}
		ports := servicePorts(obj.Spec.Ports)
		if ports == "" {
			ports = "<none>"
		}
		return []any{obj.Name, string(obj.Spec.Type), clusterIP, serviceExternalIP(obj), ports, age(obj.CreationTimestamp, now),
			labels.FormatLabels(obj.Spec.Selector)}
	})
}

// loadBalancerIngress joins the distinct IPs (or hostnames) of a load
// balancer status, sorted; kube-apiserver prints tables "wide", so never
// truncated.
func loadBalancerIngress(ips, hostnames []string) string {
	set := sets.New[string]()
	for i := range ips {
		if ips[i] != "" {
			set.Insert(ips[i])
		} else if hostnames[i] != "" {
			set.Insert(hostnames[i])
		}
	}
	return strings.Join(sets.List(set), ",")
}

func serviceLoadBalancer(s corev1.LoadBalancerStatus) string {
	ips, hosts := make([]string, len(s.Ingress)), make([]string, len(s.Ingress))
	for i, in := range s.Ingress {
		ips[i], hosts[i] = in.IP, in.Hostname
	}
	return loadBalancerIngress(ips, hosts)
}

func serviceExternalIP(svc *corev1.Service) string {
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(svc.Spec.ExternalIPs) > 0 {
			return strings.Join(svc.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		lb := serviceLoadBalancer(svc.Status.LoadBalancer)
		if len(svc.Spec.ExternalIPs) > 0 {
			var all []string
			if lb != "" {
				all = append(all, strings.Split(lb, ",")...)
			}
			return strings.Join(append(all, svc.Spec.ExternalIPs...), ",")
		}
		if lb != "" {
			return lb
		}
		return "<pending>"
	case corev1.ServiceTypeExternalName:
		return svc.Spec.ExternalName
	}
	return "<unknown>"
}

func servicePorts(ports []corev1.ServicePort) string {
	pieces := make([]string, len(ports))
	for i, p := range ports {
		if p.NodePort > 0 {
			pieces[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		} else {
			pieces[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		}
	}
	return strings.Join(pieces, ",")
}

func endpointsPrinter() printer {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Endpoints", "string", corev1.Endpoints{}.SwaggerDoc()["subsets"]),
		ageColumn(),
	}
	return typed(columns, func(obj *corev1.Endpoints, now time.Time) []any {
		return []any{obj.Name, formatEndpoints(obj), age(obj.CreationTimestamp, now)}
	})
}

// formatEndpoints lists up to three addresses (host:port per port).
func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	const max = 3
	var list []string
	more, count := false, 0
	for i := range ep.Subsets {
		ss := &ep.Subsets[i]
		if len(ss.Ports) == 0 {
			count += len(ss.Addresses)
			for j := range ss.Addresses {
				if len(list) == max {
					more = true
					break
				}
				list = append(list, ss.Addresses[j].IP)
			}
			continue
		}
		for _, port := range ss.Ports {
			count += len(ss.Addresses)
			for j := range ss.Addresses {
				if len(list) == max {
					more = true
					break
				}
				list = append(list, net.JoinHostPort(ss.Addresses[j].IP, strconv.Itoa(int(port.Port))))
			}
		}
	}
	out := strings.Join(list, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", out, count-max)
	}
	return out
}

func nodePrinter() printer {
	info := corev1.NodeSystemInfo{}.SwaggerDoc()
	addresses := corev1.NodeStatus{}.SwaggerDoc()["addresses"]
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Status", "string", "The status of the node"),
		column("Roles", "string", "The roles of the node"),
		ageColumn(),
		column("Version", "string", info["kubeletVersion"]),
		wideColumn("Internal-IP", "string", addresses),
		wideColumn("External-IP", "string", addresses),
		wideColumn("OS-Image", "string", info["osImage"]),
		wideColumn("Kernel-Version", "string", info["kernelVersion"]),
		wideColumn("Container-Runtime", "string", info["containerRuntimeVersion"]),
	}
	return typed(columns, func(obj *corev1.Node, now time.Time) []any {
		var status []string
		for _, c := range obj.Status.Conditions {
			if c.Type != corev1.NodeReady {
				continue
			}
			if c.Status == corev1.ConditionTrue {
				status = []string{string(c.Type)}
			} else {
				status = []string{"Not" + string(c.Type)}
			}
		}
		if len(status) == 0 {
			status = []string{"Unknown"}
		}
		if obj.Spec.Unschedulable {
			status = append(status, "SchedulingDisabled")
		}
		roles := strings.Join(nodeRoles(obj), ",")
		if roles == "" {
			roles = "<none>"
		}
		unknown := func(s string) string {
			if s == "" {
				return "<unknown>"
			}
			return s
		}
		ni := obj.Status.NodeInfo
		return []any{obj.Name, strings.Join(status, ","), roles, age(obj.CreationTimestamp, now), ni.KubeletVersion,
			nodeAddress(obj, corev1.NodeInternalIP), nodeAddress(obj, corev1.NodeExternalIP),
			unknown(ni.OSImage), unknown(ni.KernelVersion), unknown(ni.ContainerRuntimeVersion)}
	})
}

func nodeAddress(node *corev1.Node, typ corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == typ {
			return a.Address
		}
	}
	return "<none>"
}

// nodeRoles reads node-role.kubernetes.io/<role> and kubernetes.io/role
// labels.
func nodeRoles(node *corev1.Node) []string {
	roles := sets.New[string]()
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			if role := strings.TrimPrefix(k, "node-role.kubernetes.io/"); role != "" {
				roles.Insert(role)
			}
		case k == "kubernetes.io/role" && v != "":
			roles.Insert(v)
		}
	}
	return sets.List(roles)
}

func eventPrinter() printer {
	doc := corev1.Event{}.SwaggerDoc()
	columns := []metav1.TableColumnDefinition{
		column("Last Seen", "string", doc["lastTimestamp"]),
		column("Type", "string", doc["type"]),
		column("Reason", "string", doc["reason"]),
		column("Object", "string", doc["involvedObject"]),
		wideColumn("Subobject", "string", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
		wideColumn("Source", "string", doc["source"]),
		column("Message", "string", doc["message"]),
		wideColumn("First Seen", "string", doc["firstTimestamp"]),
		wideColumn("Count", "string", doc["count"]),
		{Name: "Name", Type: "string", Format: "name", Priority: 1, Description: objectMetaDoc("name")},
	}
	return printer{columns: columns, row: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition, error) {
		switch e := obj.(type) {
		case *corev1.Event:
			return eventCells(e, now), nil, nil
		case *eventsv1.Event:
			return eventCells(coreEvent(e), now), nil, nil
		}
		return nil, nil, fmt.Errorf("%w: %T, want an Event", ErrObjectType, obj)
	}}
}

// coreEvent maps an events.k8s.io/v1 Event to the fields of a core Event
// the printer reads, as kube-apiserver's conversion does.
func coreEvent(e *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          e.ObjectMeta,
		InvolvedObject:      e.Regarding,
		Reason:              e.Reason,
		Message:             e.Note,
		Type:                e.Type,
		EventTime:           e.EventTime,
		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
		Count:               e.DeprecatedCount,
		FirstTimestamp:      e.DeprecatedFirstTimestamp,
		LastTimestamp:       e.DeprecatedLastTimestamp,
		Source:              e.DeprecatedSource,
	}
	if e.Series != nil {
		out.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return out
}

func eventCells(e *corev1.Event, now time.Time) []any {
	first := age(e.FirstTimestamp, now)
	if e.FirstTimestamp.IsZero() {
		first = microAge(e.EventTime, now)
	}
	last := age(e.LastTimestamp, now)
	if e.LastTimestamp.IsZero() {
		last = first
	}
	count := e.Count
	if e.Series != nil {
		last = microAge(e.Series.LastObservedTime, now)
		count = e.Series.Count
	} else if count == 0 {
		count = 1 // singleton events of the new API have no count
	}
	target := strings.ToLower(e.InvolvedObject.Kind)
	if e.InvolvedObject.Name != "" {
		target += "/" + e.InvolvedObject.Name
	}
	component, instance := e.Source.Component, e.Source.Host
	if component == "" {
		component = e.ReportingController
	}
	if instance == "" {
		instance = e.ReportingInstance
	}
	source := component
	if instance != "" {
		source += ", " + instance
	}
	return []any{last, e.Type, e.Reason, target, e.InvolvedObject.FieldPath, source, strings.TrimSpace(e.Message), first, int64(count), e.Name}
}

func namespacePrinter() printer {
	columns := []metav1.TableColumnDefinition{nameColumn(), column("Status", "string", "The status of the namespace"), ageColumn()}
	return typed(columns, func(obj *corev1.Namespace, now time.Time) []any {
		return []any{obj.Name, string(obj.Status.Phase), age(obj.CreationTimestamp, now)}
	})
}

func secretPrinter() printer {
	doc := corev1.Secret{}.SwaggerDoc()
	columns := []metav1.TableColumnDefinition{nameColumn(), column("Type", "string", doc["type"]), column("Data", "string", doc["data"]), ageColumn()}
	return typed(columns, func(obj *corev1.Secret, now time.Time) []any {
		return []any{obj.Name, string(obj.Type), int64(len(obj.Data)), age(obj.CreationTimestamp, now)}
	})
}

func serviceAccountPrinter() printer {
	columns := []metav1.TableColumnDefinition{nameColumn(), column("Secrets", "string", corev1.ServiceAccount{}.SwaggerDoc()["secrets"]), ageColumn()}
	return typed(columns, func(obj *corev1.ServiceAccount, now time.Time) []any {
		return []any{obj.Name, int64(len(obj.Secrets)), age(obj.CreationTimestamp, now)}
	})
}

func configMapPrinter() printer {
	columns := []metav1.TableColumnDefinition{nameColumn(), column("Data", "string", corev1.ConfigMap{}.SwaggerDoc()["data"]), ageColumn()}
	return typed(columns, func(obj *corev1.ConfigMap, now time.Time) []any {
		return []any{obj.Name, int64(len(obj.Data) + len(obj.BinaryData)), age(obj.CreationTimestamp, now)}
	})
}

// accessModes abbreviates access modes (RWO, ROX, RWX, RWOP) in that order.
func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	has := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range modes {
		has[m] = true
	}
	var out []string
	for _, m := range []struct {
		mode corev1.PersistentVolumeAccessMode
		abbr string
	}{{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"}, {corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"}} {
		if has[m.mode] {
			out = append(out, m.abbr)
		}
	}
	return strings.Join(out, ",")
}

const betaStorageClassAnnotation = "volume.beta.kubernetes.io/storage-class"

func persistentVolumePrinter() printer {
	spec := corev1.PersistentVolumeSpec{}.SwaggerDoc()
	status := corev1.PersistentVolumeStatus{}.SwaggerDoc()
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Capacity", "string", spec["capacity"]),
		column("Access Modes", "string", spec["accessModes"]),
		column("Reclaim Policy", "string", spec["persistentVolumeReclaimPolicy"]),
		column("Status", "string", status["phase"]),
		column("Claim", "string", spec["claimRef"]),
		column("StorageClass", "string", "StorageClass of the pv"),
		column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
		column("Reason", "string", status["reason"]),
		ageColumn(),
		wideColumn("VolumeMode", "string", spec["volumeMode"]),
	}
	return typed(columns, func(obj *corev1.PersistentVolume, now time.Time) []any {
		claim := ""
		if obj.Spec.ClaimRef != nil {
			claim = obj.Spec.ClaimRef.Namespace + "/" + obj.Spec.ClaimRef.Name
		}
		capacity := obj.Spec.Capacity[corev1.ResourceStorage]
		phase := string(obj.Status.Phase)
		if obj.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		class, found := obj.Annotations[betaStorageClassAnnotation]
		if !found {
			class = obj.Spec.StorageClassName
		}
		vac := "<unset>"
		if obj.Spec.VolumeAttributesClassName != nil {
			vac = *obj.Spec.VolumeAttributesClassName
		}
		mode := "<unset>"
		if obj.Spec.VolumeMode != nil {
			mode = string(*obj.Spec.VolumeMode)
		}
		return []any{obj.Name, capacity.String(), accessModes(obj.Spec.AccessModes), string(obj.Spec.PersistentVolumeReclaimPolicy),
			phase, claim, class, vac, obj.Status.Reason, age(obj.CreationTimestamp, now), mode}
	})
}

func persistentVolumeClaimPrinter() printer {
	spec := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()
	status := corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Status", "string", status["phase"]),
		column("Volume", "string", spec["volumeName"]),
		column("Capacity", "string", status["capacity"]),
		column("Access Modes", "string", status["accessModes"]),
		column("StorageClass", "string", "StorageClass of the pvc"),
		column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
		ageColumn(),
		wideColumn("VolumeMode", "string", spec["volumeMode"]),
	}
	return typed(columns, func(obj *corev1.PersistentVolumeClaim, now time.Time) []any {
		phase := string(obj.Status.Phase)
		if obj.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		capacity, modes := "", ""
		if obj.Spec.VolumeName != "" {
			modes = accessModes(obj.Status.AccessModes)
			q := obj.Status.Capacity[corev1.ResourceStorage]
			capacity = q.String()
		}
		class, found := obj.Annotations[betaStorageClassAnnotation]
		if !found {
			class = deref(obj.Spec.StorageClassName)
		}
		vac := "<unset>"
		if obj.Spec.VolumeAttributesClassName != nil {
			vac = *obj.Spec.VolumeAttributesClassName
		}
		mode := "<unset>"
		if obj.Spec.VolumeMode != nil {
			mode = string(*obj.Spec.VolumeMode)
		}
		return []any{obj.Name, phase, obj.Spec.VolumeName, capacity, modes, class, vac, age(obj.CreationTimestamp, now), mode}
	})
}

func resourceQuotaPrinter() printer {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume."),
		column("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
		ageColumn(),
	}
	return typed(columns, func(obj *corev1.ResourceQuota, now time.Time) []any {
		names := make([]string, 0, len(obj.Status.Hard))
		for name := range obj.Status.Hard {
			names = append(names, string(name))
		}
		sort.Strings(names)
		var requests, limits []string
		for _, name := range names {
			used := obj.Status.Used[corev1.ResourceName(name)]
			hard := obj.Status.Hard[corev1.ResourceName(name)]
			entry := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
			if prefix, _, dotted := strings.Cut(name, "."); dotted && prefix == "limits" {
				limits = append(limits, entry)
			} else {
				requests = append(requests, entry)
			}
		}
		return []any{obj.Name, strings.Join(requests, ", "), strings.Join(limits, ", "), age(obj.CreationTimestamp, now)}
	})
}
