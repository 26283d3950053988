// Command upstreamgen records what kube-apiserver serves by default: it
// builds the REST storage of every API group kube-apiserver 1.37 installs
// (the storage providers of controlplane.CompletedConfig.StorageProviders,
// plus the apiextensions and apiregistration groups of the servers it
// chains), with the default resource configuration
// (controlplane.DefaultAPIResourceConfigSource) and the default feature
// gates, installs each group version with apiserver's own installer
// (APIGroupVersion.InstallREST) to get its aggregated discovery entries,
// and records each store's etcd key prefix. Nothing is served; the stores
// and the Service allocators get an embedded etcd on loopback, which is
// thrown away.
//
// It is a nested module so that the kgate module never links
// k8s.io/kubernetes/pkg/controlplane, the generic registry or go-restful.
// `go generate ./gateway/internal/discovery` runs it; its output is
// gateway/internal/discovery/testdata/upstream.json, which the discovery
// completeness test compares with kgate's discovery.
package main

import (
	"net"
	"net/url"

	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"go.etcd.io/etcd/server/v3/embed"
	"os"
	"reflect"
	"runtime/debug"
	"sort"

	restful "github.com/emicklei/go-restful/v3"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	crdregistry "k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapi "k8s.io/apiserver/pkg/endpoints"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	serveroptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	aggregatorscheme "k8s.io/kube-aggregator/pkg/apiserver/scheme"
	apiservicerest "k8s.io/kube-aggregator/pkg/registry/apiservice/rest"
	"k8s.io/kubernetes/pkg/controlplane"
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"
	"k8s.io/kubernetes/pkg/kubeapiserver"
	kubeletclient "k8s.io/kubernetes/pkg/kubelet/client"
	admissionregistrationrest "k8s.io/kubernetes/pkg/registry/admissionregistration/rest"
	apiserverinternalrest "k8s.io/kubernetes/pkg/registry/apiserverinternal/rest"
	appsrest "k8s.io/kubernetes/pkg/registry/apps/rest"
	authenticationrest "k8s.io/kubernetes/pkg/registry/authentication/rest"
	authorizationrest "k8s.io/kubernetes/pkg/registry/authorization/rest"
	autoscalingrest "k8s.io/kubernetes/pkg/registry/autoscaling/rest"
	batchrest "k8s.io/kubernetes/pkg/registry/batch/rest"
	certificatesrest "k8s.io/kubernetes/pkg/registry/certificates/rest"
	coordinationrest "k8s.io/kubernetes/pkg/registry/coordination/rest"
	corerest "k8s.io/kubernetes/pkg/registry/core/rest"
	discoveryrest "k8s.io/kubernetes/pkg/registry/discovery/rest"
	eventsrest "k8s.io/kubernetes/pkg/registry/events/rest"
	flowcontrolrest "k8s.io/kubernetes/pkg/registry/flowcontrol/rest"
	lifecyclerest "k8s.io/kubernetes/pkg/registry/lifecycle/rest"
	networkingrest "k8s.io/kubernetes/pkg/registry/networking/rest"
	noderest "k8s.io/kubernetes/pkg/registry/node/rest"
	policyrest "k8s.io/kubernetes/pkg/registry/policy/rest"
	rbacrest "k8s.io/kubernetes/pkg/registry/rbac/rest"
	resourcerest "k8s.io/kubernetes/pkg/registry/resource/rest"
	schedulingrest "k8s.io/kubernetes/pkg/registry/scheduling/rest"
	storagerest "k8s.io/kubernetes/pkg/registry/storage/rest"
	svmrest "k8s.io/kubernetes/pkg/registry/storagemigration/rest"
	"k8s.io/kubernetes/pkg/serviceaccount"
	netutils "k8s.io/utils/net"
)

// etcdPrefix is kube-apiserver's --etcd-prefix default; the stores' key
// roots are below it.
const etcdPrefix = "/registry"

// Resource is one served resource as upstream's discovery and storage
// describe it.
type Resource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
	// Discovery is the aggregated discovery entry of apiserver's installer.
	Discovery apidiscoveryv2.APIResourceDiscovery `json:"discovery"`
	// Prefix is the etcd key prefix the store asked for ("" when the
	// resource stores nothing).
	Prefix string `json:"prefix,omitempty"`
}

// Recording is the generator's output.
type Recording struct {
	// Kubernetes is the version of the k8s.io/kubernetes module recorded.
	Kubernetes string     `json:"kubernetes"`
	Resources  []Resource `json:"resources"`
}

// kubernetesVersion returns the version of k8s.io/kubernetes linked in.
func kubernetesVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/kubernetes" {
				return d.Version
			}
		}
	}
	return "unknown"
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "upstreamgen:", err)
		os.Exit(1)
	}
}

func run() error {
	// The core provider's Service IP and node port allocators read their
	// range from etcd when built: give them an embedded one on loopback.
	// The stores themselves never reach it.
	endpoint, stop, err := startEtcd()
	if err != nil {
		return err
	}
	defer stop()
	etcd := serveroptions.NewEtcdOptions(storagebackend.NewDefaultConfig(etcdPrefix, nil))
	etcd.StorageConfig.Transport.ServerList = []string{endpoint}
	sfc := kubeapiserver.NewStorageFactoryConfigEffectiveVersion(compatibility.DefaultBuildEffectiveVersion())
	sfc.APIResourceConfig = controlplane.DefaultAPIResourceConfigSource()
	sf, err := sfc.Complete(etcd).New()
	if err != nil {
		return fmt.Errorf("cannot build the storage factory: %w", err)
	}
	getter := &recorder{factory: &serveroptions.StorageFactoryRestOptionsFactory{Options: *etcd, StorageFactory: sf}}

	client := fake.NewSimpleClientset()
	inf := informers.NewSharedInformerFactory(client, 0)
	allow := authorizerfactory.NewAlwaysAllowAuthorizer()
	_, serviceRange, _ := netutils.ParseCIDRSloppy("10.0.0.0/24")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("cannot generate a signing key: %w", err)
	}
	issuer, err := serviceaccount.JWTTokenGenerator("https://kubernetes.default.svc", key)
	if err != nil {
		return fmt.Errorf("cannot build a token generator: %w", err)
	}
	legacy, err := corerest.New(corerest.Config{
		GenericConfig: corerest.GenericConfig{
			StorageFactory:       sf,
			EventTTL:             0,
			LoopbackClientConfig: &restclient.Config{Host: "https://127.0.0.1:1"},
			Informers:            inf,
			ServiceAccountIssuer: issuer,
		},
		Proxy:    corerest.ProxyConfig{KubeletClientConfig: kubeletclient.KubeletClientConfig{Port: 10250}},
		Services: corerest.ServicesConfig{ClusterIPRange: *serviceRange, NodePortRange: utilnet.PortRange{Base: 30000, Size: 2768}},
	}, allow)
	if err != nil {
		return fmt.Errorf("cannot build the core provider: %w", err)
	}
	// The providers in the order of controlplane.CompletedConfig.StorageProviders.
	providers := []controlplaneapiserver.RESTStorageProvider{
		legacy,
		apiserverinternalrest.StorageProvider{},
		authenticationrest.RESTStorageProvider{Authenticator: nil},
		authorizationrest.RESTStorageProvider{Authorizer: allow, RuleResolver: allow},
		autoscalingrest.RESTStorageProvider{},
		batchrest.RESTStorageProvider{},
		certificatesrest.RESTStorageProvider{Authorizer: allow},
		coordinationrest.RESTStorageProvider{},
		discoveryrest.StorageProvider{},
		lifecyclerest.RESTStorageProvider{},
		networkingrest.RESTStorageProvider{},
		noderest.RESTStorageProvider{},
		policyrest.RESTStorageProvider{},
		rbacrest.RESTStorageProvider{Authorizer: allow},
		schedulingrest.RESTStorageProvider{},
		storagerest.RESTStorageProvider{},
		svmrest.RESTStorageProvider{},
		flowcontrolrest.RESTStorageProvider{InformerFactory: inf},
		appsrest.StorageProvider{},
		admissionregistrationrest.RESTStorageProvider{Authorizer: allow, DiscoveryClient: client.Discovery()},
		eventsrest.RESTStorageProvider{TTL: 0},
		resourcerest.RESTStorageProvider{NamespaceClient: client.CoreV1().Namespaces(), Authorizer: allow},
	}
	cfg := controlplane.DefaultAPIResourceConfigSource()
	var out []Resource
	for _, p := range providers {
		info, err := p.NewRESTStorage(cfg, getter)
		if err != nil {
			return fmt.Errorf("cannot build the storage of %T: %w", p, err)
		}
		rs, err := install(&info)
		if err != nil {
			return err
		}
		out = append(out, rs...)
	}

	// The chained servers: apiextensions-apiserver's CRDs and
	// kube-aggregator's APIServices.
	// Their storage is kube-apiserver's etcd options applied through a
	// SimpleStorageFactory (prefix group/resource), as
	// EtcdOptions.ApplyTo sets it up for them.
	simple := func(codec runtime.Codec) *recorder {
		cfg := etcd.StorageConfig
		cfg.Codec = codec
		return &recorder{factory: &serveroptions.StorageFactoryRestOptionsFactory{Options: *etcd, StorageFactory: &serveroptions.SimpleStorageFactory{StorageConfig: cfg}}}
	}
	crd, err := crdregistry.NewREST(apiextensionsapiserver.Scheme, simple(apiextensionsapiserver.Codecs.LegacyCodec(apiextensionsv1.SchemeGroupVersion)))
	if err != nil {
		return fmt.Errorf("cannot build the CRD storage: %w", err)
	}
	crdInfo := genericapiserver.NewDefaultAPIGroupInfo("apiextensions.k8s.io", apiextensionsapiserver.Scheme, metav1.ParameterCodec, apiextensionsapiserver.Codecs)
	crdInfo.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{
		"customresourcedefinitions":        crd,
		"customresourcedefinitions/status": crdregistry.NewStatusREST(apiextensionsapiserver.Scheme, crd),
	}
	rs, err := install(&crdInfo)
	if err != nil {
		return err
	}
	out = append(out, rs...)
	agg := apiservicerest.NewRESTStorage(aggregatorapiserver.DefaultAPIResourceConfigSource(), simple(aggregatorscheme.Codecs.LegacyCodec(apiregistrationv1.SchemeGroupVersion)), false)
	rs, err = install(&agg)
	if err != nil {
		return err
	}
	out = append(out, rs...)

	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Resource < b.Resource
	})
	rec := Recording{Kubernetes: kubernetesVersion(), Resources: out}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(rec)
}

// startEtcd starts an etcd on loopback ports in a temporary directory.
func startEtcd() (endpoint string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "upstreamgen-etcd")
	if err != nil {
		return "", nil, fmt.Errorf("cannot create etcd's directory: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	free := func() (url.URL, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return url.URL{}, err
		}
		defer l.Close()
		return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
	}
	client, err := free()
	if err != nil {
		return "", nil, fmt.Errorf("cannot pick a port: %w", err)
	}
	peer, err := free()
	if err != nil {
		return "", nil, fmt.Errorf("cannot pick a port: %w", err)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("cannot start etcd: %w", err)
	}
	<-e.Server.ReadyNotify()
	return client.String(), func() { e.Close(); os.RemoveAll(dir) }, nil
}

// install runs apiserver's installer over every version of a group, as
// GenericAPIServer.installAPIResources does, and returns its aggregated
// discovery entries with the etcd prefixes the stores recorded.
func install(info *genericapiserver.APIGroupInfo) ([]Resource, error) {
	var out []Resource
	for _, gv := range info.PrioritizedVersions {
		storageMap := info.VersionedResourcesStorageMap[gv.Version]
		if len(storageMap) == 0 {
			continue
		}
		root := "/apis"
		if gv.Group == "" {
			root = "/api"
		}
		g := &genericapi.APIGroupVersion{
			Root:                        root,
			GroupVersion:                gv,
			Storage:                     storageMap,
			AllServedVersionsByResource: map[string][]string{},
			MetaGroupVersion:            info.MetaGroupVersion,
			ParameterCodec:              info.ParameterCodec,
			Serializer:                  info.NegotiatedSerializer,
			Creater:                     info.Scheme,
			Convertor:                   info.Scheme,
			ConvertabilityChecker:       info.Scheme,
			UnsafeConvertor:             runtime.UnsafeObjectConvertor(info.Scheme),
			Defaulter:                   info.Scheme,
			Typer:                       info.Scheme,
			Namer:                       runtime.Namer(meta.NewAccessor()),
			EquivalentResourceRegistry:  runtime.NewEquivalentResourceRegistry(),
			TypeConverter:               managedfields.NewDeducedTypeConverter(),
			MaxRequestBodyBytes:         3 << 20,
		}
		for version, resources := range info.VersionedResourcesStorageMap {
			for resource := range resources {
				g.AllServedVersionsByResource[resource] = append(g.AllServedVersionsByResource[resource], version)
			}
		}
		if info.OptionsExternalVersion != nil {
			g.OptionsExternalVersion = info.OptionsExternalVersion
		}
		discovered, _, err := g.InstallREST(restful.NewContainer())
		if err != nil {
			return nil, fmt.Errorf("cannot install %v: %w", gv, err)
		}
		for _, d := range discovered {
			prefix := ""
			// Only a resource that lists its own objects has them in etcd
			// (a pod Binding's REST holds the pod store, yet stores nothing
			// of its own).
			if _, lists := storageMap[d.Resource].(rest.Lister); !lists {
				// nothing stored
			} else if st := findStore(storageMap[d.Resource]); st != nil {
				prefix = etcdPrefix + st.KeyRootFunc(context.Background())
			}
			out = append(out, Resource{Group: gv.Group, Version: gv.Version, Resource: d.Resource, Discovery: d, Prefix: prefix})
		}
	}
	return out, nil
}

// findStore returns the generic registry store a REST storage is built
// on (the storage itself, or a store held in one of its fields, embedded
// or not, at most a few levels down), nil for a storage that keeps nothing
// in etcd (create-only and proxy REST).
func findStore(s any) *genericregistry.Store {
	return findStoreIn(reflect.ValueOf(s), 3)
}

func findStoreIn(v reflect.Value, depth int) *genericregistry.Store {
	for v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		if v.Type() == reflect.TypeFor[*genericregistry.Store]() {
			return (*genericregistry.Store)(v.UnsafePointer())
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || depth == 0 {
		return nil
	}
	for i := 0; i < v.NumField(); i++ {
		if st := findStoreIn(v.Field(i), depth-1); st != nil {
			return st
		}
	}
	return nil
}

// recorder is kube-apiserver's RESTOptionsGetter (its storage factory,
// undecorated: no watch cache), over the embedded etcd.
type recorder struct {
	factory generic.RESTOptionsGetter
}

func (r *recorder) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := r.factory.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	opts.Decorator = generic.UndecoratedStorage
	opts.CountMetricPollPeriod = 0
	return opts, nil
}
