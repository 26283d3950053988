package table

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Printers of networking, RBAC, storage, scheduling, coordination,
// discovery and admission resources.

func ingressPrinter() printer {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Class", "string", "The name of the IngressClass resource that should be used for additional configuration"),
		column("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
		column("Address", "string", "Address is a list containing ingress points for the load-balancer"),
		column("Ports", "string", "Ports of TLS configurations that open"),
		ageColumn(),
	}
	return typed(columns, func(obj *networkingv1.Ingress, now time.Time) []any {
		class := "<none>"
		if obj.Spec.IngressClassName != nil {
			class = *obj.Spec.IngressClassName
		}
		ips, hosts := make([]string, len(obj.Status.LoadBalancer.Ingress)), make([]string, len(obj.Status.LoadBalancer.Ingress))
		for i, in := range obj.Status.LoadBalancer.Ingress {
			ips[i], hosts[i] = in.IP, in.Hostname
		}
		ports := "80"
		if len(obj.Spec.TLS) != 0 {
			ports = "80, 443"
		}
		return []any{obj.Name, class, ingressHosts(obj.Spec.Rules), loadBalancerIngress(ips, hosts), ports, age(obj.CreationTimestamp, now)}
	})
}

// ingressHosts lists up to three rule hosts, "*" when none is set.
func ingressHosts(rules []networkingv1.IngressRule) string {
	const max = 3
	var list []string
	more := false
	for _, rule := range rules {
		if len(list) == max {
			more = true
		}
		if !more && rule.Host != "" {
			list = append(list, rule.Host)
		}
	}
	if len(list) == 0 {
		return "*"
	}
	out := strings.Join(list, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", out, len(rules)-max)
	}
	return out
}

func ingressClassPrinter() printer {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Controller", "string", "Controller that is responsible for handling this class"),
		column("Parameters", "string", "A reference to a resource with additional parameters"),
		ageColumn(),
	}
	return typed(columns, func(obj *networkingv1.IngressClass, now time.Time) []any {
		parameters := "<none>"
		if p := obj.Spec.Parameters; p != nil {
			parameters = p.Kind
			if p.APIGroup != nil {
				parameters += "." + *p.APIGroup
			}
			parameters += "/" + p.Name
		}
		return []any{obj.Name, obj.Spec.Controller, parameters, age(obj.CreationTimestamp, now)}
	})
}

func networkPolicyPrinter() printer {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Pod-Selector", "string", networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]),
		ageColumn(),
	}
	return typed(columns, func(obj *networkingv1.NetworkPolicy, now time.Time) []any {
		return []any{obj.Name, metav1.FormatLabelSelector(&obj.Spec.PodSelector), age(obj.CreationTimestamp, now)}
	})
}

func bindingColumns(kind string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		column("Role", "string", rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]),
		ageColumn(),
		wideColumn("Users", "string", "Users in the "+kind),
		wideColumn("Groups", "string", "Groups in the "+kind),
		wideColumn("ServiceAccounts", "string", "ServiceAccounts in the "+kind),
	}
}

// bindingCells prints a role binding's role and subjects by kind.
func bindingCells(name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, created metav1.Time, now time.Time) []any {
	users, groups, sas := []string{}, []string{}, []string{}
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		}
	}
	return []any{name, ref.Kind + "/" + ref.Name, age(created, now),
		strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}

func roleBindingPrinter() printer {
	return typed(bindingColumns("roleBinding"), func(obj *rbacv1.RoleBinding, now time.Time) []any {
		return bindingCells(obj.Name, obj.RoleRef, obj.Subjects, obj.CreationTimestamp, now)
	})
}

func clusterRoleBindingPrinter() printer {
	return typed(bindingColumns("clusterRoleBinding"), func(obj *rbacv1.ClusterRoleBinding, now time.Time) []any {
		return bindingCells(obj.Name, obj.RoleRef, obj.Subjects, obj.CreationTimestamp, now)
	})
}

func leasePrinter() printer {
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Holder", "string", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]),
		ageColumn(),
	}
	return typed(columns, func(obj *coordinationv1.Lease, now time.Time) []any {
		return []any{obj.Name, deref(obj.Spec.HolderIdentity), age(obj.CreationTimestamp, now)}
	})
}

func storageClassPrinter() printer {
	doc := storagev1.StorageClass{}.SwaggerDoc()
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Provisioner", "string", doc["provisioner"]),
		column("ReclaimPolicy", "string", doc["reclaimPolicy"]),
		column("VolumeBindingMode", "string", doc["volumeBindingMode"]),
		column("AllowVolumeExpansion", "string", doc["allowVolumeExpansion"]),
		ageColumn(),
	}
	return typed(columns, func(obj *storagev1.StorageClass, now time.Time) []any {
		name := obj.Name
		if obj.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" ||
			obj.Annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true" {
			name += " (default)"
		}
		reclaim := "Delete"
		if obj.ReclaimPolicy != nil {
			reclaim = string(*obj.ReclaimPolicy)
		}
		binding := string(storagev1.VolumeBindingImmediate)
		if obj.VolumeBindingMode != nil {
			binding = string(*obj.VolumeBindingMode)
		}
		return []any{name, obj.Provisioner, reclaim, binding, deref(obj.AllowVolumeExpansion), age(obj.CreationTimestamp, now)}
	})
}

func priorityClassPrinter() printer {
	doc := schedulingv1.PriorityClass{}.SwaggerDoc()
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("Value", "integer", doc["value"]),
		column("Global-Default", "boolean", doc["globalDefault"]),
		ageColumn(),
		column("PreemptionPolicy", "string", doc["preemptionPolicy"]),
	}
	return typed(columns, func(obj *schedulingv1.PriorityClass, now time.Time) []any {
		var policy string
		if obj.PreemptionPolicy != nil {
			policy = string(*obj.PreemptionPolicy)
		}
		return []any{obj.Name, int64(obj.Value), obj.GlobalDefault, age(obj.CreationTimestamp, now), policy}
	})
}

func endpointSlicePrinter() printer {
	doc := discoveryv1.EndpointSlice{}.SwaggerDoc()
	columns := []metav1.TableColumnDefinition{
		nameColumn(),
		column("AddressType", "string", doc["addressType"]),
		column("Ports", "string", doc["ports"]),
		column("Endpoints", "string", doc["endpoints"]),
		ageColumn(),
	}
	return typed(columns, func(obj *discoveryv1.EndpointSlice, now time.Time) []any {
		return []any{obj.Name, string(obj.AddressType), sliceEndpointPorts(obj.Ports), sliceEndpoints(obj.Endpoints), age(obj.CreationTimestamp, now)}
	})
}

// listWithMore joins up to three entries of count, "<unset>" when empty.
func listWithMore(list []string, count int) string {
	const max = 3
	if count > max {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:max], ","), count-max)
	}
	if len(list) == 0 {
		return "<unset>"
	}
	return strings.Join(list, ",")
}

func sliceEndpointPorts(ports []discoveryv1.EndpointPort) string {
	list := make([]string, 0, len(ports))
	for _, p := range ports {
		switch {
		case p.Port != nil:
			list = append(list, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			list = append(list, *p.Name)
		default:
			list = append(list, "*")
		}
	}
	return listWithMore(list, len(list))
}

func sliceEndpoints(endpoints []discoveryv1.Endpoint) string {
	var list []string
	for _, e := range endpoints {
		list = append(list, e.Addresses...)
	}
	return listWithMore(list, len(list))
}

func webhookColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		column("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in this configuration"),
		ageColumn(),
	}
}

func mutatingWebhookPrinter() printer {
	return typed(webhookColumns(), func(obj *admissionregistrationv1.MutatingWebhookConfiguration, now time.Time) []any {
		return []any{obj.Name, int64(len(obj.Webhooks)), age(obj.CreationTimestamp, now)}
	})
}

func validatingWebhookPrinter() printer {
	return typed(webhookColumns(), func(obj *admissionregistrationv1.ValidatingWebhookConfiguration, now time.Time) []any {
		return []any{obj.Name, int64(len(obj.Webhooks)), age(obj.CreationTimestamp, now)}
	})
}
