// Package table renders objects as metav1.Table for server-side printing
// (kubectl get asks for "application/json;as=Table;v=v1;g=meta.k8s.io"),
// with the columns and cells kube-apiserver's printers produce for the
// built-in resources (k8s.io/kubernetes/pkg/printers/internalversion,
// which cannot be imported) and kube-apiserver's default table, NAME and
// CREATED AT, for the others.
//
// Like kube-apiserver, every row carries all columns, the "wide" ones
// (priority 1) included: kubectl hides them unless asked for -o wide.
package table

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kgate/kgate/storage/registry"
)

// ErrIncludeObject is returned for an includeObject value other than
// None, Metadata, Object or empty; kube-apiserver answers it with 400
// BadRequest ("unrecognized includeObject value").
var ErrIncludeObject = errors.New("table: unrecognized includeObject value")

// ErrObjectType is returned when an object is not of the Go type the
// resource is served as.
var ErrObjectType = errors.New("table: object of unexpected type")

// Convert renders objs, objects of resource res as decoded with the
// registry's scheme (the served kind's Go type: *appsv1.Deployment for
// deployments), as a Table. now is the reference time for ages.
//
// includeObject selects what each row's object holds, as in
// kube-apiserver: "Metadata" (or empty, the default) a
// meta.k8s.io/v1 PartialObjectMetadata, "Object" the full object with its
// apiVersion and kind set (a copy: objs are not modified), "None" nothing.
//
// The caller sets the Table's resourceVersion, continue and
// remainingItemCount from the list (or object) it printed. For a watch,
// kube-apiserver sends the column definitions with the first event only:
// the caller clears ColumnDefinitions on later events.
func Convert(objs []runtime.Object, res *registry.Resource, includeObject string, now time.Time) (*metav1.Table, error) {
	switch metav1.IncludeObjectPolicy(includeObject) {
	case "", metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
	default:
		return nil, fmt.Errorf("%w: %q", ErrIncludeObject, includeObject)
	}
	p := printerFor(res)
	t := &metav1.Table{
		TypeMeta:          metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: "Table"},
		ColumnDefinitions: p.columns,
		Rows:              make([]metav1.TableRow, 0, len(objs)),
	}
	for _, obj := range objs {
		cells, conditions, err := p.row(obj, now)
		if err != nil {
			return nil, fmt.Errorf("cannot print %s: %w", res.Resource, err)
		}
		row := metav1.TableRow{Cells: cells, Conditions: conditions}
		if row.Object, err = rowObject(obj, res, metav1.IncludeObjectPolicy(includeObject)); err != nil {
			return nil, fmt.Errorf("cannot print %s: %w", res.Resource, err)
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// rowObject returns what a row carries for the includeObject policy.
func rowObject(obj runtime.Object, res *registry.Resource, policy metav1.IncludeObjectPolicy) (runtime.RawExtension, error) {
	switch policy {
	case metav1.IncludeNone:
		return runtime.RawExtension{}, nil
	case metav1.IncludeObject:
		out := obj.DeepCopyObject()
		out.GetObjectKind().SetGroupVersionKind(res.GVK())
		return runtime.RawExtension{Object: out}, nil
	default:
		m, err := meta.Accessor(obj)
		if err != nil {
			return runtime.RawExtension{}, fmt.Errorf("cannot read metadata of %T: %w", obj, err)
		}
		partial := meta.AsPartialObjectMetadata(m)
		partial.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
		return runtime.RawExtension{Object: partial}, nil
	}
}

// printer prints one resource: its columns and, per object, the cells
// (and row conditions).
type printer struct {
	columns []metav1.TableColumnDefinition
	row     func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition, error)
}

// typed adapts a printing function for objects of Go type T.
func typed[T runtime.Object](columns []metav1.TableColumnDefinition, row func(obj T, now time.Time) []any) printer {
	return printer{columns: columns, row: func(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition, error) {
		o, ok := obj.(T)
		if !ok {
			var want T
			return nil, nil, fmt.Errorf("%w: %T, want %T", ErrObjectType, obj, want)
		}
		return row(o, now), nil, nil
	}}
}

// printerFor returns the printer kube-apiserver uses for res, selected by
// group and kind (the printers print every version of a kind alike).
func printerFor(res *registry.Resource) printer {
	switch res.Group + "/" + res.Kind {
	case "/Pod":
		return podPrinter()
	case "/PodTemplate":
		return podTemplatePrinter()
	case "/ReplicationController":
		return replicationControllerPrinter()
	case "/Service":
		return servicePrinter()
	case "/Endpoints":
		return endpointsPrinter()
	case "/Node":
		return nodePrinter()
	case "/Event", "events.k8s.io/Event":
		return eventPrinter()
	case "/Namespace":
		return namespacePrinter()
	case "/Secret":
		return secretPrinter()
	case "/ServiceAccount":
		return serviceAccountPrinter()
	case "/PersistentVolume":
		return persistentVolumePrinter()
	case "/PersistentVolumeClaim":
		return persistentVolumeClaimPrinter()
	case "/ConfigMap":
		return configMapPrinter()
	case "/ResourceQuota":
		return resourceQuotaPrinter()
	case "apps/Deployment":
		return deploymentPrinter()
	case "apps/ReplicaSet":
		return replicaSetPrinter()
	case "apps/DaemonSet":
		return daemonSetPrinter()
	case "apps/StatefulSet":
		return statefulSetPrinter()
	case "apps/ControllerRevision":
		return controllerRevisionPrinter()
	case "batch/Job":
		return jobPrinter()
	case "batch/CronJob":
		return cronJobPrinter()
	case "autoscaling/HorizontalPodAutoscaler":
		return horizontalPodAutoscalerPrinter()
	case "policy/PodDisruptionBudget":
		return podDisruptionBudgetPrinter()
	case "networking.k8s.io/Ingress":
		return ingressPrinter()
	case "networking.k8s.io/IngressClass":
		return ingressClassPrinter()
	case "networking.k8s.io/NetworkPolicy":
		return networkPolicyPrinter()
	case "rbac.authorization.k8s.io/RoleBinding":
		return roleBindingPrinter()
	case "rbac.authorization.k8s.io/ClusterRoleBinding":
		return clusterRoleBindingPrinter()
	case "coordination.k8s.io/Lease":
		return leasePrinter()
	case "storage.k8s.io/StorageClass":
		return storageClassPrinter()
	case "scheduling.k8s.io/PriorityClass":
		return priorityClassPrinter()
	case "discovery.k8s.io/EndpointSlice":
		return endpointSlicePrinter()
	case "admissionregistration.k8s.io/MutatingWebhookConfiguration":
		return mutatingWebhookPrinter()
	case "admissionregistration.k8s.io/ValidatingWebhookConfiguration":
		return validatingWebhookPrinter()
	}
	return defaultPrinter()
}

// defaultPrinter is kube-apiserver's table for resources without a
// printer of their own (Role, ClusterRole, LimitRange, ...).
func defaultPrinter() printer {
	columns := []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc("name")},
		{Name: "Created At", Type: "date", Description: objectMetaDoc("creationTimestamp")},
	}
	return printer{columns: columns, row: func(obj runtime.Object, _ time.Time) ([]any, []metav1.TableRowCondition, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %T has no metadata", ErrObjectType, obj)
		}
		return []any{m.GetName(), m.GetCreationTimestamp().UTC().Format(time.RFC3339)}, nil, nil
	}}
}

// Column definitions most printers share.

func objectMetaDoc(field string) string { return metav1.ObjectMeta{}.SwaggerDoc()[field] }

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc("name")}
}

func ageColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDoc("creationTimestamp")}
}

func column(name, typ, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc}
}

func wideColumn(name, typ, desc string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc, Priority: 1}
}

func containersColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		wideColumn("Containers", "string", "Names of each container in the template."),
		wideColumn("Images", "string", "Images referenced by each container in the template."),
	}
}

// age is kube-apiserver's translateTimestampSince, relative to now.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// microAge is age for a MicroTime.
func microAge(t metav1.MicroTime, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func printBoolPtr(v *bool) string {
	if v == nil {
		return "<unset>"
	}
	if *v {
		return "True"
	}
	return "False"
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
