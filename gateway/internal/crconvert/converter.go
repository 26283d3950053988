// Package crconvert converts custom resources between the versions of
// their CustomResourceDefinition as kube-apiserver does, with
// apiextensions-apiserver's own converters (pkg/apiserver/conversion):
// strategy None sets apiVersion only; strategy Webhook posts a
// ConversionReview (v1 or v1beta1, the first of the CRD's
// conversionReviewVersions the converter knows) to the CRD's url or
// service, trusting its caBundle, and checks the answer (uid, count,
// apiVersion, kind, metadata) as upstream does. Objects already in the
// asked version are not sent.
package crconvert

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Config configures a Converter.
type Config struct {
	// Logger is required.
	Logger *slog.Logger
	// Services resolves the service references of conversion webhooks;
	// nil answers them with an error (url webhooks still work).
	Services Services
}

// Converter converts custom resources. Safe for concurrent use.
type Converter struct {
	log     *slog.Logger
	factory *conversion.CRConverterFactory

	mu sync.Mutex // guards byName
	// byName holds upstream's converter of each CRD by name, built for
	// the CRD value it holds: a changed CRD (a new value from the
	// registry) gets a new converter, a deleted one leaves one entry
	// until a CRD of that name comes again.
	byName map[string]entry
}

type entry struct {
	crd  *apiextensionsv1.CustomResourceDefinition
	conv runtime.ObjectConvertor // upstream's safe converter: in is not modified
}

// New returns a Converter.
func New(cfg Config) (*Converter, error) {
	if cfg.Logger == nil {
		return nil, errors.New("cannot make custom resource converter: a logger is required")
	}
	f, err := conversion.NewCRConverterFactory(serviceResolver{cfg.Services}, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot make custom resource converter: %w", err)
	}
	return &Converter{log: cfg.Logger, factory: f, byName: map[string]entry{}}, nil
}

// converter returns upstream's converter of crd, built on first use.
func (c *Converter) converter(crd *apiextensionsv1.CustomResourceDefinition) (runtime.ObjectConvertor, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byName[crd.Name]; ok && e.crd == crd {
		return e.conv, nil
	}
	def := crd
	if def.Spec.Conversion == nil {
		// The API defaults it (None); a CRD put into etcd by another
		// writer may lack it, and upstream's factory needs it.
		def = crd.DeepCopy()
		def.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	}
	safe, _, err := c.factory.NewConverter(def)
	if err != nil {
		return nil, fmt.Errorf("cannot make the converter of %s: %w", crd.Name, err)
	}
	c.byName[crd.Name] = entry{crd: crd, conv: safe}
	c.log.Debug("custom resource converter built", "crd", crd.Name, "strategy", def.Spec.Conversion.Strategy)
	return safe, nil
}

// Convert returns obj, a custom resource of crd, converted to version (a
// version of crd); obj itself when it is in that version already, else a
// new object (obj is not modified).
func (c *Converter) Convert(crd *apiextensionsv1.CustomResourceDefinition, obj *unstructured.Unstructured, version string) (*unstructured.Unstructured, error) {
	gv := schema.GroupVersion{Group: crd.Spec.Group, Version: version}
	if obj.GetAPIVersion() == gv.String() {
		return obj, nil
	}
	conv, err := c.converter(crd)
	if err != nil {
		return nil, err
	}
	out, err := conv.ConvertToVersion(obj, gv)
	if err != nil {
		return nil, err
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cannot convert %s to %v: the converter returned %T", crd.Name, gv, out)
	}
	return u, nil
}

// ConvertList returns items, custom resources of crd, converted to
// version, in one call of the webhook for those not in it already.
func (c *Converter) ConvertList(crd *apiextensionsv1.CustomResourceDefinition, items []*unstructured.Unstructured, version string) ([]*unstructured.Unstructured, error) {
	gv := schema.GroupVersion{Group: crd.Spec.Group, Version: version}
	need := false
	for _, it := range items {
		if it.GetAPIVersion() != gv.String() {
			need = true
			break
		}
	}
	if !need {
		return items, nil
	}
	conv, err := c.converter(crd)
	if err != nil {
		return nil, err
	}
	list := &unstructured.UnstructuredList{Items: make([]unstructured.Unstructured, len(items))}
	list.SetGroupVersionKind(gv.WithKind(crd.Status.AcceptedNames.ListKind))
	for i, it := range items {
		list.Items[i] = *it
	}
	out, err := conv.ConvertToVersion(list, gv)
	if err != nil {
		return nil, err
	}
	ul, ok := out.(*unstructured.UnstructuredList)
	if !ok || len(ul.Items) != len(items) {
		return nil, fmt.Errorf("cannot convert a list of %s to %v: the converter returned %T", crd.Name, gv, out)
	}
	res := make([]*unstructured.Unstructured, len(items))
	for i := range ul.Items {
		res[i] = &ul.Items[i]
	}
	return res, nil
}
