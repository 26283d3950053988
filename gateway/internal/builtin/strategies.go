package builtin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/kube-aggregator/pkg/registry/apiservice"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingwebhookconfiguration"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/resolver"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingadmissionpolicy"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingadmissionpolicybinding"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingwebhookconfiguration"
	"k8s.io/kubernetes/pkg/registry/apps/controllerrevision"
	"k8s.io/kubernetes/pkg/registry/apps/daemonset"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/apps/replicaset"
	"k8s.io/kubernetes/pkg/registry/apps/statefulset"
	"k8s.io/kubernetes/pkg/registry/autoscaling/horizontalpodautoscaler"
	"k8s.io/kubernetes/pkg/registry/batch/cronjob"
	"k8s.io/kubernetes/pkg/registry/batch/job"
	"k8s.io/kubernetes/pkg/registry/coordination/lease"
	"k8s.io/kubernetes/pkg/registry/core/configmap"
	"k8s.io/kubernetes/pkg/registry/core/endpoint"
	"k8s.io/kubernetes/pkg/registry/core/event"
	"k8s.io/kubernetes/pkg/registry/core/limitrange"
	"k8s.io/kubernetes/pkg/registry/core/namespace"
	"k8s.io/kubernetes/pkg/registry/core/node"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolume"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/kubernetes/pkg/registry/core/podtemplate"
	"k8s.io/kubernetes/pkg/registry/core/replicationcontroller"
	"k8s.io/kubernetes/pkg/registry/core/resourcequota"
	"k8s.io/kubernetes/pkg/registry/core/secret"
	"k8s.io/kubernetes/pkg/registry/core/service"
	"k8s.io/kubernetes/pkg/registry/core/serviceaccount"
	"k8s.io/kubernetes/pkg/registry/discovery/endpointslice"
	"k8s.io/kubernetes/pkg/registry/networking/ingress"
	"k8s.io/kubernetes/pkg/registry/networking/ingressclass"
	"k8s.io/kubernetes/pkg/registry/networking/networkpolicy"
	"k8s.io/kubernetes/pkg/registry/policy/poddisruptionbudget"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrole"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding"
	"k8s.io/kubernetes/pkg/registry/rbac/role"
	"k8s.io/kubernetes/pkg/registry/rbac/rolebinding"
	"k8s.io/kubernetes/pkg/registry/scheduling/priorityclass"
	"k8s.io/kubernetes/pkg/registry/storage/storageclass"

	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingadmissionpolicy"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingadmissionpolicybinding"
	"k8s.io/kubernetes/pkg/registry/certificates/certificates"
	"k8s.io/kubernetes/pkg/registry/certificates/clustertrustbundle"
	"k8s.io/kubernetes/pkg/registry/certificates/podcertificaterequest"
	"k8s.io/kubernetes/pkg/registry/flowcontrol/flowschema"
	"k8s.io/kubernetes/pkg/registry/flowcontrol/prioritylevelconfiguration"
	"k8s.io/kubernetes/pkg/registry/networking/ipaddress"
	"k8s.io/kubernetes/pkg/registry/networking/servicecidr"
	"k8s.io/kubernetes/pkg/registry/node/runtimeclass"
	"k8s.io/kubernetes/pkg/registry/resource/deviceclass"
	"k8s.io/kubernetes/pkg/registry/resource/devicetaintrule"
	"k8s.io/kubernetes/pkg/registry/resource/resourceclaim"
	"k8s.io/kubernetes/pkg/registry/resource/resourceclaimtemplate"
	"k8s.io/kubernetes/pkg/registry/resource/resourceslice"
	"k8s.io/kubernetes/pkg/registry/storage/csidriver"
	"k8s.io/kubernetes/pkg/registry/storage/csinode"
	"k8s.io/kubernetes/pkg/registry/storage/csistoragecapacity"
	"k8s.io/kubernetes/pkg/registry/storage/volumeattachment"
	"k8s.io/kubernetes/pkg/registry/storage/volumeattributesclass"
	"k8s.io/kubernetes/pkg/registry/storagemigration/storagemigration"
	"k8s.io/utils/clock"

	"github.com/kgate/kgate/storage/registry"
)

// A strategy is what upstream's registry.Store is configured with for one
// resource: what is both a create and an update strategy.
type strategy interface {
	rest.RESTCreateStrategy
	rest.RESTUpdateStrategy
}

// strategies are the registry strategies of one resource: the main one
// (create, update, and the scale subresource, which upstream applies to the
// parent object with the main strategy) and one per subresource that has
// its own (status, finalize).
type strategies struct {
	main strategy
	sub  map[string]rest.RESTUpdateStrategy
}

// noStrategy lists the served resources that have no registry strategy,
// and why: they are never stored, so upstream runs no strategy for them.
var noStrategy = map[schema.GroupResource]string{
	{Resource: "bindings"}: "create-only: a Binding sets a pod's spec.nodeName through the pod's binding REST, no strategy of its own",
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       "create-only review API: answered, never stored",
	{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             "create-only review API: answered, never stored",
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: "create-only review API: answered, never stored",
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  "create-only review API: answered, never stored",
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   "create-only review API: answered, never stored",
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      "create-only review API: answered, never stored",
}

// newStrategies returns the strategy table of every built-in resource,
// keyed by group and resource. resolve maps a kind to its resource, for
// the admission policy strategies' paramKind checks; typer is the scheme
// the strategies that take one are built with (CRDs).
func newStrategies(typer runtime.ObjectTyper, resolve resolver.ResourceResolverFunc) map[schema.GroupResource]strategies {
	status := func(s rest.RESTUpdateStrategy) map[string]rest.RESTUpdateStrategy {
		return map[string]rest.RESTUpdateStrategy{"status": s}
	}
	// The admission policy strategies authorize paramKind/paramRef
	// against an authorizer; nil skips that, as kgate's own authorizer
	// (gateway/internal/authz) is the one that checks requests.
	vap := validatingadmissionpolicy.NewStrategy(nil, resolve)
	// ResourceClaims: the namespace reader is for adminAccess requests
	// (noNamespaces refuses them, see its doc); the authorizer for the
	// status checks of resourceclaims/binding and
	// resourceclaims/driver, which kgate's authorizer does not make yet:
	// always allowing them leaves the check to RBAC on resourceclaims/status.
	claims := resourceclaim.NewStrategy(noNamespaces{}, authorizerfactory.NewAlwaysAllowAuthorizer())
	// PodCertificateRequests: the status strategy checks the signer's
	// "sign" permission with an authorizer; kgate's RBAC checks
	// podcertificaterequests/status instead (the same always-allow
	// deviation as for ResourceClaims).
	pcr := podcertificaterequest.NewStrategy()
	return map[schema.GroupResource]strategies{
		{Resource: "configmaps"}:             {main: configmap.Strategy},
		{Resource: "endpoints"}:              {main: endpoint.Strategy},
		{Resource: "events"}:                 {main: event.Strategy},
		{Resource: "limitranges"}:            {main: limitrange.Strategy},
		{Resource: "namespaces"}:             {main: namespace.Strategy, sub: map[string]rest.RESTUpdateStrategy{"status": namespace.StatusStrategy, "finalize": namespace.FinalizeStrategy}},
		{Resource: "nodes"}:                  {main: node.Strategy, sub: status(node.StatusStrategy)},
		{Resource: "persistentvolumeclaims"}: {main: persistentvolumeclaim.Strategy, sub: status(persistentvolumeclaim.StatusStrategy)},
		{Resource: "persistentvolumes"}:      {main: persistentvolume.Strategy, sub: status(persistentvolume.StatusStrategy)},
		{Resource: "pods"}:                   {main: pod.Strategy, sub: map[string]rest.RESTUpdateStrategy{"status": pod.StatusStrategy, "ephemeralcontainers": pod.EphemeralContainersStrategy, "resize": pod.ResizeStrategy}},
		{Resource: "podtemplates"}:           {main: podtemplate.Strategy},
		{Resource: "replicationcontrollers"}: {main: replicationcontroller.Strategy, sub: status(replicationcontroller.StatusStrategy)},
		{Resource: "resourcequotas"}:         {main: resourcequota.Strategy, sub: status(resourcequota.StatusStrategy)},
		{Resource: "secrets"}:                {main: secret.Strategy},
		{Resource: "serviceaccounts"}:        {main: serviceaccount.Strategy},
		{Resource: "services"}:               {main: service.Strategy, sub: status(service.StatusStrategy)},

		{Group: "apps", Resource: "controllerrevisions"}: {main: controllerrevision.Strategy},
		{Group: "apps", Resource: "daemonsets"}:          {main: daemonset.Strategy, sub: status(daemonset.StatusStrategy)},
		{Group: "apps", Resource: "deployments"}:         {main: deployment.Strategy, sub: status(deployment.StatusStrategy)},
		{Group: "apps", Resource: "replicasets"}:         {main: replicaset.Strategy, sub: status(replicaset.StatusStrategy)},
		{Group: "apps", Resource: "statefulsets"}:        {main: statefulset.Strategy, sub: status(statefulset.StatusStrategy)},

		{Group: "autoscaling", Resource: "horizontalpodautoscalers"}: {main: horizontalpodautoscaler.Strategy, sub: status(horizontalpodautoscaler.StatusStrategy)},
		{Group: "batch", Resource: "cronjobs"}:                       {main: cronjob.Strategy, sub: status(cronjob.StatusStrategy)},
		{Group: "batch", Resource: "jobs"}:                           {main: job.Strategy, sub: status(job.StatusStrategy)},

		{Group: "coordination.k8s.io", Resource: "leases"}:        {main: lease.Strategy},
		{Group: "discovery.k8s.io", Resource: "endpointslices"}:   {main: endpointslice.Strategy},
		{Group: "events.k8s.io", Resource: "events"}:              {main: event.Strategy},
		{Group: "networking.k8s.io", Resource: "ingressclasses"}:  {main: ingressclass.Strategy},
		{Group: "networking.k8s.io", Resource: "ingresses"}:       {main: ingress.Strategy, sub: status(ingress.StatusStrategy)},
		{Group: "networking.k8s.io", Resource: "networkpolicies"}: {main: networkpolicy.Strategy},
		{Group: "policy", Resource: "poddisruptionbudgets"}:       {main: poddisruptionbudget.Strategy, sub: status(poddisruptionbudget.StatusStrategy)},

		{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}: {main: clusterrolebinding.Strategy},
		{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}:        {main: clusterrole.Strategy},
		{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}:        {main: rolebinding.Strategy},
		{Group: "rbac.authorization.k8s.io", Resource: "roles"}:               {main: role.Strategy},

		{Group: "scheduling.k8s.io", Resource: "priorityclasses"}: {main: priorityclass.Strategy},
		{Group: "storage.k8s.io", Resource: "storageclasses"}:     {main: storageclass.Strategy},

		{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}:     {main: mutatingwebhookconfiguration.Strategy},
		{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}:   {main: validatingwebhookconfiguration.Strategy},
		{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}:       {main: vap, sub: status(validatingadmissionpolicy.NewStatusStrategy(vap))},
		{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"}: {main: validatingadmissionpolicybinding.NewStrategy(nil, nil, resolve)},

		{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}:               {main: certificates.Strategy, sub: map[string]rest.RESTUpdateStrategy{"status": certificates.StatusStrategy, "approval": certificates.ApprovalStrategy}},
		{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"}:                     {main: flowschema.Strategy, sub: status(flowschema.StatusStrategy)},
		{Group: "flowcontrol.apiserver.k8s.io", Resource: "prioritylevelconfigurations"}:     {main: prioritylevelconfiguration.Strategy, sub: status(prioritylevelconfiguration.StatusStrategy)},
		{Group: "networking.k8s.io", Resource: "ipaddresses"}:                                {main: ipaddress.Strategy},
		{Group: "networking.k8s.io", Resource: "servicecidrs"}:                               {main: servicecidr.Strategy, sub: status(servicecidr.StatusStrategy)},
		{Group: "node.k8s.io", Resource: "runtimeclasses"}:                                   {main: runtimeclass.Strategy},
		{Group: "resource.k8s.io", Resource: "deviceclasses"}:                                {main: deviceclass.Strategy},
		{Group: "resource.k8s.io", Resource: "resourceclaims"}:                               {main: claims, sub: status(resourceclaim.NewStatusStrategy(claims))},
		{Group: "resource.k8s.io", Resource: "resourceclaimtemplates"}:                       {main: resourceclaimtemplate.NewStrategy(noNamespaces{})},
		{Group: "resource.k8s.io", Resource: "resourceslices"}:                               {main: resourceslice.Strategy},
		{Group: "storage.k8s.io", Resource: "csidrivers"}:                                    {main: csidriver.Strategy},
		{Group: "storage.k8s.io", Resource: "csinodes"}:                                      {main: csinode.Strategy, sub: status(csinode.StatusStrategy)},
		{Group: "storage.k8s.io", Resource: "csistoragecapacities"}:                          {main: csistoragecapacity.Strategy},
		{Group: "storage.k8s.io", Resource: "volumeattachments"}:                             {main: volumeattachment.Strategy, sub: status(volumeattachment.StatusStrategy)},
		{Group: "storage.k8s.io", Resource: "volumeattributesclasses"}:                       {main: volumeattributesclass.Strategy},
		{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicies"}:       {main: mutatingadmissionpolicy.NewStrategy(nil, resolve)},
		{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicybindings"}: {main: mutatingadmissionpolicybinding.NewStrategy(nil, nil, resolve)},
		{Group: "certificates.k8s.io", Resource: "clustertrustbundles"}:                      {main: clustertrustbundle.Strategy},
		{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}:                   {main: pcr, sub: status(podcertificaterequest.NewStatusStrategy(pcr, authorizerfactory.NewAlwaysAllowAuthorizer(), clock.RealClock{}))},
		{Group: "resource.k8s.io", Resource: "devicetaintrules"}:                             {main: devicetaintrule.Strategy, sub: status(devicetaintrule.StatusStrategy)},
		{Group: "storagemigration.k8s.io", Resource: "storageversionmigrations"}:             {main: storagemigration.Strategy, sub: status(storagemigration.StatusStrategy)},
		// apiextensions-apiserver's: PrepareForCreate/Update (status
		// reset, storedVersions), ValidateCustomResourceDefinition(Update),
		// and the status strategy (ValidateUpdateCustomResourceDefinitionStatus).
		{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}: {
			main: customresourcedefinition.NewStrategy(typer),
			sub:  status(customresourcedefinition.NewStatusStrategy(typer)),
		},
		// kube-aggregator's: ValidateAPIService(Update) (group/version
		// name, priorities, service or local, caBundle), the status reset
		// on spec writes and the status strategy.
		{Group: "apiregistration.k8s.io", Resource: "apiservices"}: {
			main: apiservice.NewStrategy(typer),
			sub:  status(apiservice.NewStatusStrategy(typer)),
		},
	}
}

// resolverFor returns a ResourceResolver over the served resources.
func resolverFor(resources []registry.Resource) resolver.ResourceResolverFunc {
	byKind := make(map[schema.GroupVersionKind]schema.GroupVersionResource, len(resources))
	for i := range resources {
		byKind[resources[i].GVK()] = resources[i].GVR()
	}
	return func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
		if gvr, ok := byKind[gvk]; ok {
			return gvr, nil
		}
		return schema.GroupVersionResource{}, fmt.Errorf("%w: no served resource of kind %s", ErrUnknown, gvk)
	}
}

// noNamespaces is the namespace reader of the resource.k8s.io strategies,
// which read a namespace only for a request of adminAccess to devices (to
// check its resource.k8s.io/admin-access label). kgate does not hand the
// strategies its storage yet: such a request fails validation with
// upstream's "could not retrieve namespace" error; every other claim is
// unaffected.
type noNamespaces struct {
	corev1client.NamespaceInterface // nil: only Get is called
}

func (noNamespaces) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Namespace, error) {
	return nil, fmt.Errorf("%w: namespace %s is not readable by the resource.k8s.io strategies in kgate yet", ErrUnknown, name)
}
