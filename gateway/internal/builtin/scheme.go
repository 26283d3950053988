package builtin

import (
	"fmt"

	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	"k8s.io/apimachinery/pkg/runtime"
	apiregistrationinstall "k8s.io/kube-aggregator/pkg/apis/apiregistration/install"
	admissionregistrationinstall "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	appsinstall "k8s.io/kubernetes/pkg/apis/apps/install"
	authenticationinstall "k8s.io/kubernetes/pkg/apis/authentication/install"
	authorizationinstall "k8s.io/kubernetes/pkg/apis/authorization/install"
	autoscalinginstall "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	batchinstall "k8s.io/kubernetes/pkg/apis/batch/install"
	certificatesinstall "k8s.io/kubernetes/pkg/apis/certificates/install"
	coordinationinstall "k8s.io/kubernetes/pkg/apis/coordination/install"
	coreinstall "k8s.io/kubernetes/pkg/apis/core/install"
	discoveryinstall "k8s.io/kubernetes/pkg/apis/discovery/install"
	eventsinstall "k8s.io/kubernetes/pkg/apis/events/install"
	flowcontrolinstall "k8s.io/kubernetes/pkg/apis/flowcontrol/install"
	networkinginstall "k8s.io/kubernetes/pkg/apis/networking/install"
	nodeinstall "k8s.io/kubernetes/pkg/apis/node/install"
	policyinstall "k8s.io/kubernetes/pkg/apis/policy/install"
	rbacinstall "k8s.io/kubernetes/pkg/apis/rbac/install"
	resourceinstall "k8s.io/kubernetes/pkg/apis/resource/install"
	schedulinginstall "k8s.io/kubernetes/pkg/apis/scheduling/install"
	storageinstall "k8s.io/kubernetes/pkg/apis/storage/install"
	storagemigrationinstall "k8s.io/kubernetes/pkg/apis/storagemigration/install"
)

// newScheme returns a scheme of the package's own with upstream's internal
// and versioned types of every built-in group kgate serves, their
// conversions and their defaulters (apiextensions.k8s.io's from
// k8s.io/apiextensions-apiserver, apiregistration.k8s.io's from
// k8s.io/kube-aggregator). (Importing the install packages also
// installs them in k8s.io/kubernetes's legacyscheme, which the strategies'
// declarative validation reads; this package adds nothing to it.)
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	installs := []func(*runtime.Scheme){
		coreinstall.Install, appsinstall.Install, batchinstall.Install,
		autoscalinginstall.Install, coordinationinstall.Install, discoveryinstall.Install,
		eventsinstall.Install, networkinginstall.Install, policyinstall.Install,
		rbacinstall.Install, schedulinginstall.Install, storageinstall.Install,
		admissionregistrationinstall.Install, authenticationinstall.Install,
		authorizationinstall.Install, apiextensionsinstall.Install,
		certificatesinstall.Install, flowcontrolinstall.Install, nodeinstall.Install, resourceinstall.Install,
		storagemigrationinstall.Install, apiregistrationinstall.Install,
	}
	for _, install := range installs {
		// Install panics on a registration error (utilruntime.Must);
		// recover it into an error for the constructor.
		if err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("cannot build the upstream scheme: %v", r)
				}
			}()
			install(s)
			return nil
		}(); err != nil {
			return nil, err
		}
	}
	return s, nil
}
