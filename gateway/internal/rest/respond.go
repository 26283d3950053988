package rest

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/convert"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/storage/registry"
)

// objectMeta returns the metadata of an object, typed or unstructured (a
// custom resource).
func objectMeta(obj runtime.Object) (metav1.Object, error) {
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if m, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok {
			return m, nil
		}
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	return nil, fmt.Errorf("cannot read the metadata of %T", obj)
}

// decodeServed decodes an object's served JSON (as a cache node keeps it)
// into its typed form.
func (h *Handler) decodeServed(res *registry.Resource, data []byte) (runtime.Object, error) {
	obj, err := h.decodeStored(res, data)
	if err != nil {
		return nil, err
	}
	return h.served(res, obj)
}

// decodeServedList is decodeServed for the items of one list; custom
// resources are converted together (servedList).
func (h *Handler) decodeServedList(res *registry.Resource, items [][]byte) ([]runtime.Object, error) {
	if res.CRD == nil {
		objs := make([]runtime.Object, len(items))
		for i, it := range items {
			var err error
			if objs[i], err = h.decodeServed(res, it); err != nil {
				return nil, err
			}
		}
		return objs, nil
	}
	us := make([]*unstructured.Unstructured, len(items))
	for i, it := range items {
		obj, err := h.decodeStored(res, it)
		if err != nil {
			return nil, err
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("cannot decode a custom resource: got %T", obj)
		}
		us[i] = u
	}
	return h.servedList(res, us)
}

// decodeStored decodes an object's stored JSON into its typed form.
func (h *Handler) decodeStored(res *registry.Resource, data []byte) (runtime.Object, error) {
	obj, err := h.cfg.Registry.NewStored(res)
	if err != nil {
		return nil, err
	}
	if err := h.cfg.StorageCodec.Decode(data, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// readDefaulter is implemented by semantics whose objects get defaults
// when read from storage (custom resources, customresource.Semantics).
type readDefaulter interface {
	ReadDefaults(res *registry.Resource) func(*unstructured.Unstructured)
}

// readDefaults returns what reading an object of res from storage does
// to it, as upstream's storage decoder: nil when nothing (its stored
// bytes are served as they are).
func (h *Handler) readDefaults(res *registry.Resource) func(*unstructured.Unstructured) {
	if res.CRD == nil {
		return nil
	}
	d, ok := h.cfg.Semantics.(readDefaulter)
	if !ok {
		return nil
	}
	return d.ReadDefaults(res)
}

// crConverter is implemented by semantics that convert custom resources
// between the versions of their CRD (customresource.Semantics, by the
// CRD's conversion strategy: None or Webhook).
type crConverter interface {
	ConvertCustomResource(res *registry.Resource, obj *unstructured.Unstructured, version string) (*unstructured.Unstructured, error)
	// ConvertsReads: objects read from storage may be in another
	// version than res's (and are decoded to be served).
	ConvertsReads(res *registry.Resource) bool
}

// crListConverter is implemented by semantics that convert the custom
// resources of a list in one call (customresource.Semantics).
type crListConverter interface {
	ConvertCustomResources(res *registry.Resource, objs []*unstructured.Unstructured, version string) ([]*unstructured.Unstructured, error)
}

// servedList is served for the stored custom resources of one list,
// which this request owns: they get their read defaults, then are
// converted to res's version together (one ConversionReview for a
// webhook, as upstream converts a list); one by one by semantics that
// cannot convert a list.
func (h *Handler) servedList(res *registry.Resource, objs []*unstructured.Unstructured) ([]runtime.Object, error) {
	c, ok := h.cfg.Semantics.(crListConverter)
	if !ok {
		out := make([]runtime.Object, len(objs))
		for i, obj := range objs {
			var err error
			if out[i], err = h.served(res, obj); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if def := h.readDefaults(res); def != nil {
		for _, u := range objs {
			def(u)
		}
	}
	conv, err := c.ConvertCustomResources(res, objs, res.Version)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Object, len(conv))
	for i, u := range conv {
		out[i] = u
	}
	return out, nil
}

// servedCRs is servedList for custom resources read from storage, which
// may be shared: copied first when reading gives them defaults.
func (h *Handler) servedCRs(res *registry.Resource, objs []runtime.Object) ([]runtime.Object, error) {
	copyFirst := h.readDefaults(res) != nil
	us := make([]*unstructured.Unstructured, len(objs))
	for i, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("cannot serve a custom resource: got %T", obj)
		}
		if copyFirst {
			u = u.DeepCopy()
		}
		us[i] = u
	}
	return h.servedList(res, us)
}

// crConvert converts obj to version when it is a custom resource and the
// semantics convert them (ok false otherwise).
func (h *Handler) crConvert(res *registry.Resource, obj runtime.Object, version string) (out runtime.Object, ok bool, err error) {
	c, isConv := h.cfg.Semantics.(crConverter)
	u, isCR := obj.(*unstructured.Unstructured)
	if !isConv || !isCR || res.CRD == nil {
		return nil, false, nil
	}
	out, err = c.ConvertCustomResource(res, u, version)
	return out, true, err
}

// decodesReads reports whether objects of res read from a cache node are
// decoded to be served (their stored bytes are not served as they are):
// they get defaults when read, or may need converting.
func (h *Handler) decodesReads(res *registry.Resource) bool {
	if h.readDefaults(res) != nil {
		return true
	}
	c, ok := h.cfg.Semantics.(crConverter)
	return ok && c.ConvertsReads(res)
}

// served applies the read defaults to obj, a stored object this
// request owns, and converts it to the kind res serves.
func (h *Handler) served(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	if def := h.readDefaults(res); def != nil {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			def(u)
		}
	}
	if out, ok, err := h.crConvert(res, obj, res.Version); ok {
		return out, err
	}
	if res.StorageKind.Kind == "" {
		return obj, nil
	}
	return convert.FromStorage(res, obj)
}

// toServed converts a stored object to the kind res serves, with the
// defaults reading it from storage gives it (on a copy: obj may be
// shared).
func (h *Handler) toServed(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	if h.readDefaults(res) != nil {
		obj = obj.DeepCopyObject()
	}
	return h.served(res, obj)
}

// toStored converts a served object to the kind res is stored as.
func (h *Handler) toStored(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	if out, ok, err := h.crConvert(res, obj, res.StorageGVK().Version); ok {
		return out, err
	}
	if res.StorageKind.Kind == "" {
		return obj, nil
	}
	return convert.ToStorage(res, obj)
}

func (h *Handler) send(r *request, code int, contentType string, body []byte) error {
	r.rc.SetStatusCode(code)
	r.rc.SetContentType(contentType)
	r.rc.SetBody(body)
	return nil
}

// writeCached answers with one object as a cache node returned it: served
// JSON, or a bare protobuf message when format is Protobuf.
func (h *Handler) writeCached(r *request, code int, data []byte, format client.Format) error {
	m := r.media
	if m.As != negotiate.AsObject || h.decodesReads(r.res) {
		obj, err := h.decodeStored(r.res, data)
		if err != nil {
			return err
		}
		return h.writeObject(r, code, obj)
	}
	switch {
	case format == client.Protobuf:
		return h.send(r, code, m.ContentType(), negotiate.ObjectProtobuf(r.res.APIVersion(), r.res.Kind, data))
	case m.Format == negotiate.YAML:
		body, err := negotiate.ObjectYAML(data)
		if err != nil {
			return err
		}
		return h.send(r, code, m.ContentType(), body)
	case m.Pretty:
		body, err := negotiate.PrettyJSON(data)
		if err != nil {
			return err
		}
		return h.send(r, code, m.ContentType(), body)
	}
	return h.send(r, code, m.ContentType(), data)
}

// writeObject answers with a typed object of the storage kind, owned by
// the request, given the defaults reading it from storage gives it and
// converted to the served kind here (an object of the served kind is left
// so).
func (h *Handler) writeObject(r *request, code int, obj runtime.Object) error {
	obj, err := h.served(r.res, obj)
	if err != nil {
		return err
	}
	m := r.media
	var out runtime.Object = obj
	switch m.As {
	case negotiate.AsTable:
		t, err := h.objectTable(r, obj)
		if err != nil {
			return err
		}
		if om, err := objectMeta(obj); err == nil {
			t.ResourceVersion = om.GetResourceVersion()
		}
		out = t
	case negotiate.AsPartialObjectMetadata:
		om, err := objectMeta(obj)
		if err != nil {
			return err
		}
		out = partial(r, om, m.AsVersion)
	case negotiate.AsPartialObjectMetadataList:
		return apierror.NotAcceptable([]string{"application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"})
	}
	body, err := h.cfg.Codec.Encode(out, m.Format, m.Pretty)
	if err != nil {
		return err
	}
	return h.send(r, code, m.ContentType(), body)
}

func partial(r *request, om metav1.Object, version string) *metav1.PartialObjectMetadata {
	if version == "" {
		version = "v1"
	}
	p := meta.AsPartialObjectMetadata(om)
	p.TypeMeta = metav1.TypeMeta{APIVersion: "meta.k8s.io/" + version, Kind: "PartialObjectMetadata"}
	return p
}

// table prints a list; objectTable one object (get, write, watch event),
// as kube-apiserver does with each.
func (h *Handler) table(r *request, objs []runtime.Object) (*metav1.Table, error) {
	t, err := h.tables.Convert(objs, r.res, r.includeObject)
	return h.tableVersion(r, t, err)
}

func (h *Handler) objectTable(r *request, obj runtime.Object) (*metav1.Table, error) {
	t, err := h.tables.ConvertObject(obj, r.res, r.includeObject)
	return h.tableVersion(r, t, err)
}

func (h *Handler) tableVersion(r *request, t *metav1.Table, err error) (*metav1.Table, error) {
	if err != nil {
		return nil, apierror.BadRequest(err.Error())
	}
	if r.media.AsVersion == "v1beta1" {
		// As upstream's asTable: the table and the PartialObjectMetadata
		// of its rows in the version asked for.
		t.APIVersion = "meta.k8s.io/v1beta1"
		for i := range t.Rows {
			if p, ok := t.Rows[i].Object.Object.(*metav1.PartialObjectMetadata); ok {
				p.APIVersion = "meta.k8s.io/v1beta1"
			}
		}
	}
	return t, nil
}

// writeList answers with a list of pre-encoded items.
func (h *Handler) writeList(r *request, items [][]byte, format client.Format, rev int64, cont string, remaining *int64) error {
	m := r.media
	if m.As != negotiate.AsObject || h.decodesReads(r.res) {
		objs, err := h.decodeServedList(r.res, items)
		if err != nil {
			return err
		}
		return h.writeObjectList(r, objs, rev, cont, remaining)
	}
	return h.sendList(r, items, format, rev, cont, remaining)
}

// sendList answers with a list of items encoded in the request's media.
func (h *Handler) sendList(r *request, items [][]byte, format client.Format, rev int64, cont string, remaining *int64) error {
	m := r.media
	l := &negotiate.List{
		APIVersion: r.res.APIVersion(), Kind: r.res.ListKind(),
		ResourceVersion: strconv.FormatInt(rev, 10), Continue: cont, RemainingItemCount: remaining,
		Items: items,
	}
	switch {
	case format == client.Protobuf:
		return h.send(r, 200, m.ContentType(), negotiate.ListProtobuf(l))
	case m.Format == negotiate.YAML:
		body, err := negotiate.ListYAML(l)
		if err != nil {
			return err
		}
		return h.send(r, 200, m.ContentType(), body)
	}
	body := negotiate.ListJSON(l)
	if m.Pretty {
		var err error
		if body, err = negotiate.PrettyJSON(body); err != nil {
			return err
		}
	}
	return h.send(r, 200, m.ContentType(), body)
}

// writeObjectList answers with a list of typed objects of the served kind.
func (h *Handler) writeObjectList(r *request, objs []runtime.Object, rev int64, cont string, remaining *int64) error {
	m := r.media
	lm := metav1.ListMeta{ResourceVersion: strconv.FormatInt(rev, 10), Continue: cont, RemainingItemCount: remaining}
	switch m.As {
	case negotiate.AsTable:
		t, err := h.table(r, objs)
		if err != nil {
			return err
		}
		t.ListMeta = lm
		return h.encodeAndSend(r, t)
	case negotiate.AsPartialObjectMetadataList, negotiate.AsPartialObjectMetadata:
		version := m.AsVersion
		if version == "" {
			version = "v1"
		}
		l := &metav1.PartialObjectMetadataList{
			TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/" + version, Kind: "PartialObjectMetadataList"},
			ListMeta: lm,
		}
		for _, obj := range objs {
			om, err := objectMeta(obj)
			if err != nil {
				return err
			}
			l.Items = append(l.Items, *partial(r, om, version))
		}
		return h.encodeAndSend(r, l)
	}
	// Encode each item once and assemble the list like the cached path.
	items := make([][]byte, 0, len(objs))
	format := cacheFormat(m)
	for _, obj := range objs {
		var b []byte
		var err error
		if format == client.Protobuf {
			b, err = h.cfg.StorageCodec.EncodeRawProtobuf(obj)
		} else {
			b, err = h.cfg.StorageCodec.EncodeJSON(obj)
		}
		if err != nil {
			return fmt.Errorf("cannot encode list item: %w", err)
		}
		items = append(items, b)
	}
	return h.sendList(r, items, format, rev, cont, remaining)
}

func (h *Handler) encodeAndSend(r *request, obj runtime.Object) error {
	body, err := h.cfg.Codec.Encode(obj, r.media.Format, r.media.Pretty)
	if err != nil {
		return err
	}
	return h.send(r, 200, r.media.ContentType(), body)
}
