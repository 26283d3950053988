package devcluster_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	apirest "k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/coordination/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/discovery/install"
	_ "k8s.io/kubernetes/pkg/apis/events/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"
	mutatingwebhookconfigurationreg "k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingwebhookconfiguration"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/resolver"
	validatingadmissionpolicyreg "k8s.io/kubernetes/pkg/registry/admissionregistration/validatingadmissionpolicy"
	validatingadmissionpolicybindingreg "k8s.io/kubernetes/pkg/registry/admissionregistration/validatingadmissionpolicybinding"
	validatingwebhookconfigurationreg "k8s.io/kubernetes/pkg/registry/admissionregistration/validatingwebhookconfiguration"
	controllerrevisionreg "k8s.io/kubernetes/pkg/registry/apps/controllerrevision"
	daemonsetreg "k8s.io/kubernetes/pkg/registry/apps/daemonset"
	deploymentreg "k8s.io/kubernetes/pkg/registry/apps/deployment"
	replicasetreg "k8s.io/kubernetes/pkg/registry/apps/replicaset"
	statefulsetreg "k8s.io/kubernetes/pkg/registry/apps/statefulset"
	horizontalpodautoscalerreg "k8s.io/kubernetes/pkg/registry/autoscaling/horizontalpodautoscaler"
	cronjobreg "k8s.io/kubernetes/pkg/registry/batch/cronjob"
	jobreg "k8s.io/kubernetes/pkg/registry/batch/job"
	leasereg "k8s.io/kubernetes/pkg/registry/coordination/lease"
	configmapreg "k8s.io/kubernetes/pkg/registry/core/configmap"
	endpointreg "k8s.io/kubernetes/pkg/registry/core/endpoint"
	eventreg "k8s.io/kubernetes/pkg/registry/core/event"
	limitrangereg "k8s.io/kubernetes/pkg/registry/core/limitrange"
	namespacereg "k8s.io/kubernetes/pkg/registry/core/namespace"
	nodereg "k8s.io/kubernetes/pkg/registry/core/node"
	persistentvolumereg "k8s.io/kubernetes/pkg/registry/core/persistentvolume"
	persistentvolumeclaimreg "k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim"
	podreg "k8s.io/kubernetes/pkg/registry/core/pod"
	podtemplatereg "k8s.io/kubernetes/pkg/registry/core/podtemplate"
	replicationcontrollerreg "k8s.io/kubernetes/pkg/registry/core/replicationcontroller"
	resourcequotareg "k8s.io/kubernetes/pkg/registry/core/resourcequota"
	secretreg "k8s.io/kubernetes/pkg/registry/core/secret"
	servicereg "k8s.io/kubernetes/pkg/registry/core/service"
	serviceaccountreg "k8s.io/kubernetes/pkg/registry/core/serviceaccount"
	endpointslicereg "k8s.io/kubernetes/pkg/registry/discovery/endpointslice"
	ingressreg "k8s.io/kubernetes/pkg/registry/networking/ingress"
	ingressclassreg "k8s.io/kubernetes/pkg/registry/networking/ingressclass"
	networkpolicyreg "k8s.io/kubernetes/pkg/registry/networking/networkpolicy"
	servicecidrreg "k8s.io/kubernetes/pkg/registry/networking/servicecidr"
	runtimeclassreg "k8s.io/kubernetes/pkg/registry/node/runtimeclass"
	poddisruptionbudgetreg "k8s.io/kubernetes/pkg/registry/policy/poddisruptionbudget"
	clusterrolereg "k8s.io/kubernetes/pkg/registry/rbac/clusterrole"
	clusterrolebindingreg "k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding"
	rolereg "k8s.io/kubernetes/pkg/registry/rbac/role"
	rolebindingreg "k8s.io/kubernetes/pkg/registry/rbac/rolebinding"
	deviceclassreg "k8s.io/kubernetes/pkg/registry/resource/deviceclass"
	priorityclassreg "k8s.io/kubernetes/pkg/registry/scheduling/priorityclass"
	csidriverreg "k8s.io/kubernetes/pkg/registry/storage/csidriver"
	storageclassreg "k8s.io/kubernetes/pkg/registry/storage/storageclass"
	volumeattributesclassreg "k8s.io/kubernetes/pkg/registry/storage/volumeattributesclass"

	"github.com/kgate/kgate/storage/registry"
)

// The test's own oracle of upstream's validation, independent of the
// gateway's (gateway/internal/builtin): kube-apiserver's registry
// strategies, the scheme they are installed in (legacyscheme), and
// k8s.io/apiserver's rest.BeforeCreate and rest.BeforeUpdate, which its
// registry store calls and which answer the 422 Invalid.

type upstreamStrategy interface {
	apirest.RESTCreateStrategy
	apirest.RESTUpdateStrategy
}

func noResolver(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	return schema.GroupVersionResource{}, errors.New("no param kinds in these tests")
}

var vapStrategy = validatingadmissionpolicyreg.NewStrategy(nil, resolver.ResourceResolverFunc(noResolver))

// upstreamStrategies: every stored built-in resource's main strategy.
var upstreamStrategies = map[string]upstreamStrategy{
	"/configmaps": configmapreg.Strategy, "/endpoints": endpointreg.Strategy, "/events": eventreg.Strategy,
	"/limitranges": limitrangereg.Strategy, "/namespaces": namespacereg.Strategy, "/nodes": nodereg.Strategy,
	"/persistentvolumeclaims": persistentvolumeclaimreg.Strategy, "/persistentvolumes": persistentvolumereg.Strategy,
	"/pods": podreg.Strategy, "/podtemplates": podtemplatereg.Strategy, "/replicationcontrollers": replicationcontrollerreg.Strategy,
	"/resourcequotas": resourcequotareg.Strategy, "/secrets": secretreg.Strategy, "/serviceaccounts": serviceaccountreg.Strategy,
	"/services":                servicereg.Strategy,
	"apps/controllerrevisions": controllerrevisionreg.Strategy, "apps/daemonsets": daemonsetreg.Strategy,
	"apps/deployments": deploymentreg.Strategy, "apps/replicasets": replicasetreg.Strategy, "apps/statefulsets": statefulsetreg.Strategy,
	"autoscaling/horizontalpodautoscalers": horizontalpodautoscalerreg.Strategy,
	"batch/cronjobs":                       cronjobreg.Strategy, "batch/jobs": jobreg.Strategy,
	"coordination.k8s.io/leases": leasereg.Strategy, "discovery.k8s.io/endpointslices": endpointslicereg.Strategy,
	"events.k8s.io/events": eventreg.Strategy, "networking.k8s.io/ingressclasses": ingressclassreg.Strategy,
	"networking.k8s.io/ingresses": ingressreg.Strategy, "networking.k8s.io/networkpolicies": networkpolicyreg.Strategy,
	"policy/poddisruptionbudgets":                   poddisruptionbudgetreg.Strategy,
	"rbac.authorization.k8s.io/clusterrolebindings": clusterrolebindingreg.Strategy,
	"rbac.authorization.k8s.io/clusterroles":        clusterrolereg.Strategy,
	"rbac.authorization.k8s.io/rolebindings":        rolebindingreg.Strategy, "rbac.authorization.k8s.io/roles": rolereg.Strategy,
	"scheduling.k8s.io/priorityclasses": priorityclassreg.Strategy, "storage.k8s.io/storageclasses": storageclassreg.Strategy,
	"admissionregistration.k8s.io/mutatingwebhookconfigurations":     mutatingwebhookconfigurationreg.Strategy,
	"admissionregistration.k8s.io/validatingwebhookconfigurations":   validatingwebhookconfigurationreg.Strategy,
	"admissionregistration.k8s.io/validatingadmissionpolicies":       vapStrategy,
	"admissionregistration.k8s.io/validatingadmissionpolicybindings": validatingadmissionpolicybindingreg.NewStrategy(nil, nil, resolver.ResourceResolverFunc(noResolver)),
	"networking.k8s.io/servicecidrs":                                 servicecidrreg.Strategy,
	"node.k8s.io/runtimeclasses":                                     runtimeclassreg.Strategy,
	"resource.k8s.io/deviceclasses":                                  deviceclassreg.Strategy,
	"storage.k8s.io/csidrivers":                                      csidriverreg.Strategy,
	"storage.k8s.io/volumeattributesclasses":                         volumeattributesclassreg.Strategy,
}

// upstreamCauses runs upstream's create (old nil) or update of obj, a
// versioned object of res, and returns the causes of its 422 ("type
// field", sorted; none when upstream accepts it).
func upstreamCauses(t *testing.T, res *registry.Resource, obj, old runtime.Object) []string {
	t.Helper()
	strategy, ok := upstreamStrategies[res.Group+"/"+res.Resource]
	if !ok {
		t.Fatalf("no upstream strategy for %s in the test's table", res.GVR())
	}
	internal := func(o runtime.Object) runtime.Object {
		o = o.DeepCopyObject()
		legacyscheme.Scheme.Default(o)
		out, err := legacyscheme.Scheme.ConvertToVersion(o, schema.GroupVersion{Group: res.Group, Version: runtime.APIVersionInternal})
		if err != nil {
			t.Fatalf("cannot convert to upstream's internal type: %v", err)
		}
		return out
	}
	m := mustMeta(obj)
	ns := ""
	if res.Namespaced {
		ns = m.GetNamespace()
	}
	prefix := "apis"
	if res.Group == "" {
		prefix = "api"
	}
	ctx := genericapirequest.WithNamespace(context.Background(), ns)
	var err error
	if old == nil {
		ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
			IsResourceRequest: true, Verb: "create", APIPrefix: prefix, APIGroup: res.Group, APIVersion: res.Version,
			Namespace: ns, Resource: res.Resource, Name: m.GetName(),
		})
		err = apirest.BeforeCreate(strategy, ctx, internal(obj))
	} else {
		ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
			IsResourceRequest: true, Verb: "update", APIPrefix: prefix, APIGroup: res.Group, APIVersion: res.Version,
			Namespace: ns, Resource: res.Resource, Name: m.GetName(),
		})
		err = apirest.BeforeUpdate(strategy, ctx, internal(obj), internal(old))
	}
	if err == nil {
		return nil
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Details == nil {
		t.Fatalf("upstream answered %v, not a 422 Invalid", err)
	}
	var out []string
	for _, c := range se.ErrStatus.Details.Causes {
		out = append(out, string(c.Type)+" "+c.Field)
	}
	slices.Sort(out)
	return out
}
