package autoregister

import "k8s.io/apimachinery/pkg/runtime/schema"

// priority is an APIService's groupPriorityMinimum and versionPriority.
type priority struct{ group, version int32 }

// builtinPriorities is kube-apiserver 1.37's apiVersionPriorities: the
// generic table of k8s.io/kubernetes/pkg/controlplane/apiserver
// (DefaultGenericAPIServicePriorities) merged with the one of
// cmd/kube-apiserver/app/aggregator.go. Both are data inside packages
// that build the generic API server (which kgate does not link), so they
// are repeated here; a group/version missing from it gets no APIService,
// as upstream's makeAPIService skips it.
var builtinPriorities = map[schema.GroupVersion]priority{
	{Group: "", Version: "v1"}:                                   {18000, 1},
	{Group: "events.k8s.io", Version: "v1"}:                      {17750, 15},
	{Group: "events.k8s.io", Version: "v1beta1"}:                 {17750, 5},
	{Group: "authentication.k8s.io", Version: "v1"}:              {17700, 15},
	{Group: "authentication.k8s.io", Version: "v1beta1"}:         {17700, 9},
	{Group: "authentication.k8s.io", Version: "v1alpha1"}:        {17700, 1},
	{Group: "authorization.k8s.io", Version: "v1"}:               {17600, 15},
	{Group: "certificates.k8s.io", Version: "v1"}:                {17300, 15},
	{Group: "certificates.k8s.io", Version: "v1beta1"}:           {17300, 9},
	{Group: "certificates.k8s.io", Version: "v1alpha1"}:          {17300, 1},
	{Group: "rbac.authorization.k8s.io", Version: "v1"}:          {17000, 15},
	{Group: "apiextensions.k8s.io", Version: "v1"}:               {16700, 15},
	{Group: "admissionregistration.k8s.io", Version: "v1"}:       {16700, 15},
	{Group: "admissionregistration.k8s.io", Version: "v1beta1"}:  {16700, 12},
	{Group: "admissionregistration.k8s.io", Version: "v1alpha1"}: {16700, 9},
	{Group: "coordination.k8s.io", Version: "v1"}:                {16500, 15},
	{Group: "coordination.k8s.io", Version: "v1beta1"}:           {16500, 13},
	{Group: "coordination.k8s.io", Version: "v1alpha2"}:          {16500, 12},
	{Group: "discovery.k8s.io", Version: "v1"}:                   {16200, 15},
	{Group: "discovery.k8s.io", Version: "v1beta1"}:              {16200, 12},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1"}:       {16100, 21},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1beta3"}:  {16100, 18},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1beta2"}:  {16100, 15},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1beta1"}:  {16100, 12},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1alpha1"}: {16100, 9},
	{Group: "internal.apiserver.k8s.io", Version: "v1alpha1"}:    {16000, 9},
	{Group: "storagemigration.k8s.io", Version: "v1"}:            {15800, 15},
	{Group: "storagemigration.k8s.io", Version: "v1beta1"}:       {15800, 9},

	{Group: "apps", Version: "v1"}:                    {17800, 15},
	{Group: "autoscaling", Version: "v1"}:             {17500, 15},
	{Group: "autoscaling", Version: "v2"}:             {17500, 30},
	{Group: "autoscaling", Version: "v2beta1"}:        {17500, 9},
	{Group: "autoscaling", Version: "v2beta2"}:        {17500, 1},
	{Group: "batch", Version: "v1"}:                   {17400, 15},
	{Group: "batch", Version: "v1beta1"}:              {17400, 9},
	{Group: "batch", Version: "v2alpha1"}:             {17400, 9},
	{Group: "networking.k8s.io", Version: "v1"}:       {17200, 15},
	{Group: "networking.k8s.io", Version: "v1beta1"}:  {17200, 9},
	{Group: "policy", Version: "v1"}:                  {17100, 15},
	{Group: "policy", Version: "v1beta1"}:             {17100, 9},
	{Group: "storage.k8s.io", Version: "v1"}:          {16800, 15},
	{Group: "storage.k8s.io", Version: "v1beta1"}:     {16800, 9},
	{Group: "storage.k8s.io", Version: "v1alpha1"}:    {16800, 1},
	{Group: "scheduling.k8s.io", Version: "v1"}:       {16600, 15},
	{Group: "scheduling.k8s.io", Version: "v1beta1"}:  {16600, 9},
	{Group: "scheduling.k8s.io", Version: "v1alpha3"}: {16600, 3},
	{Group: "node.k8s.io", Version: "v1"}:             {16300, 15},
	{Group: "node.k8s.io", Version: "v1alpha1"}:       {16300, 1},
	{Group: "node.k8s.io", Version: "v1beta1"}:        {16300, 9},
	{Group: "resource.k8s.io", Version: "v1"}:         {16200, 21},
	{Group: "resource.k8s.io", Version: "v1beta2"}:    {16200, 15},
	{Group: "resource.k8s.io", Version: "v1beta1"}:    {16200, 9},
	{Group: "resource.k8s.io", Version: "v1alpha3"}:   {16200, 1},
	{Group: "lifecycle.k8s.io", Version: "v1alpha1"}:  {15700, 1},
}

// crdPriority is what upstream's crdregistration controller gives the
// APIService of a CRD group/version: "CRDs should have relatively low
// priority", and among themselves kube-like version order.
var crdPriority = priority{group: 1000, version: 100}
