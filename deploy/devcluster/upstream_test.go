package devcluster_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	apirest "k8s.io/apiserver/pkg/registry/rest"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/certificates/install"
	_ "k8s.io/kubernetes/pkg/apis/coordination/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/discovery/install"
	_ "k8s.io/kubernetes/pkg/apis/events/install"
	_ "k8s.io/kubernetes/pkg/apis/flowcontrol/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"
	_ "k8s.io/kubernetes/pkg/apis/storagemigration/install"
	mutatingadmissionpolicyreg "k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingadmissionpolicy"
	mutatingadmissionpolicybindingreg "k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingadmissionpolicybinding"
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
	csrreg "k8s.io/kubernetes/pkg/registry/certificates/certificates"
	clustertrustbundlereg "k8s.io/kubernetes/pkg/registry/certificates/clustertrustbundle"
	podcertificaterequestreg "k8s.io/kubernetes/pkg/registry/certificates/podcertificaterequest"
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
	flowschemareg "k8s.io/kubernetes/pkg/registry/flowcontrol/flowschema"
	prioritylevelconfigurationreg "k8s.io/kubernetes/pkg/registry/flowcontrol/prioritylevelconfiguration"
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
	devicetaintrulereg "k8s.io/kubernetes/pkg/registry/resource/devicetaintrule"
	resourceclaimreg "k8s.io/kubernetes/pkg/registry/resource/resourceclaim"
	resourceclaimtemplatereg "k8s.io/kubernetes/pkg/registry/resource/resourceclaimtemplate"
	resourceslicereg "k8s.io/kubernetes/pkg/registry/resource/resourceslice"
	priorityclassreg "k8s.io/kubernetes/pkg/registry/scheduling/priorityclass"
	csidriverreg "k8s.io/kubernetes/pkg/registry/storage/csidriver"
	csinodereg "k8s.io/kubernetes/pkg/registry/storage/csinode"
	csistoragecapacityreg "k8s.io/kubernetes/pkg/registry/storage/csistoragecapacity"
	storageclassreg "k8s.io/kubernetes/pkg/registry/storage/storageclass"
	volumeattachmentreg "k8s.io/kubernetes/pkg/registry/storage/volumeattachment"
	volumeattributesclassreg "k8s.io/kubernetes/pkg/registry/storage/volumeattributesclass"
	storagemigrationreg "k8s.io/kubernetes/pkg/registry/storagemigration/storagemigration"

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

// noNamespaces is the namespace reader of the resource.k8s.io strategies,
// read only for a request of adminAccess to devices, which no test here
// makes (the gateway's has the same answer).
type noNamespaces struct {
	corev1client.NamespaceInterface // nil: only Get is called
}

func (noNamespaces) Get(context.Context, string, metav1.GetOptions) (*corev1.Namespace, error) {
	return nil, errors.New("no namespaces in these tests")
}

var (
	claimStrategy = resourceclaimreg.NewStrategy(noNamespaces{}, nil)
	pcrStrategy   = podcertificaterequestreg.NewStrategy()
)

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
	"certificates.k8s.io/certificatesigningrequests":                 csrreg.Strategy,
	"certificates.k8s.io/clustertrustbundles":                        clustertrustbundlereg.Strategy,
	"certificates.k8s.io/podcertificaterequests":                     pcrStrategy,
	"flowcontrol.apiserver.k8s.io/flowschemas":                       flowschemareg.Strategy,
	"flowcontrol.apiserver.k8s.io/prioritylevelconfigurations":       prioritylevelconfigurationreg.Strategy,
	"resource.k8s.io/resourceclaims":                                 claimStrategy,
	"resource.k8s.io/resourceclaimtemplates":                         resourceclaimtemplatereg.NewStrategy(noNamespaces{}),
	"resource.k8s.io/resourceslices":                                 resourceslicereg.Strategy,
	"resource.k8s.io/devicetaintrules":                               devicetaintrulereg.Strategy,
	"storage.k8s.io/csinodes":                                        csinodereg.Strategy,
	"storage.k8s.io/csistoragecapacities":                            csistoragecapacityreg.Strategy,
	"storage.k8s.io/volumeattachments":                               volumeattachmentreg.Strategy,
	"admissionregistration.k8s.io/mutatingadmissionpolicies":         mutatingadmissionpolicyreg.NewStrategy(nil, resolver.ResourceResolverFunc(noResolver)),
	"admissionregistration.k8s.io/mutatingadmissionpolicybindings":   mutatingadmissionpolicybindingreg.NewStrategy(nil, nil, resolver.ResourceResolverFunc(noResolver)),
	"storagemigration.k8s.io/storageversionmigrations":               storagemigrationreg.Strategy,
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
