package rest

import (
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/watchhub"
)

// watchEncoder turns deliveries into watch frames in one watch's media.
// Frames of the plain object forms are memoized on the shared event, so
// each event is encoded once per format on a gateway, not once per
// watcher.
type watchEncoder struct {
	h         *Handler
	r         *request
	tableSent bool
	sent      eventCounter // apiserver_watch_events_total and _sizes
}

func eventType(t watchhub.Type) watch.EventType { return watch.EventType(t.String()) }

// memoizable reports whether frames depend only on (format, type, event):
// plain objects of a kind served as stored.
func (e *watchEncoder) memoizable() bool {
	return e.r.media.As == negotiate.AsObject && e.r.res.StorageKind.Kind == ""
}

// frame is d's frame for the watch p; nil when the watch does not see
// it once converted (selectServed).
func (e *watchEncoder) frame(d watchhub.Delivery, p *watchPlan) ([]byte, error) {
	if p.selectServed {
		return e.selected(d, p.opts.labels, p.opts.fields)
	}
	return e.delivery(d)
}

func (e *watchEncoder) delivery(d watchhub.Delivery) ([]byte, error) {
	t := eventType(d.Type)
	if d.UsePrev {
		obj, err := e.servedEvent(d.Event, true)
		if err != nil {
			return nil, err
		}
		m, err := objectMeta(obj)
		if err != nil {
			return nil, err
		}
		m.SetResourceVersion(strconv.FormatInt(d.Rev, 10))
		return e.object(t, obj)
	}
	if !e.memoizable() {
		obj, err := e.servedEvent(d.Event, false)
		if err != nil {
			return nil, err
		}
		return e.object(t, obj)
	}
	key := uint32(e.r.media.Format)<<8 | uint32(d.Type)
	return d.Event.Memo(key, func() ([]byte, error) {
		if e.r.media.Format == negotiate.Protobuf || e.h.decodesReads(e.r.res) {
			obj, err := e.h.decodeServed(e.r.res, d.Event.Object)
			if err != nil {
				return nil, err
			}
			return e.object(t, obj)
		}
		return negotiate.AppendWatchJSON(nil, t, d.Event.Object), nil
	})
}

// servedEvent is the event's object (prev: its previous state) as this
// watch serves it. A custom resource that may need converting is
// converted once per event and served version on this gateway (a
// conversion webhook is asked once, not once per watcher); each watcher
// decodes its own copy.
func (e *watchEncoder) servedEvent(ev *watchhub.Shared, prev bool) (runtime.Object, error) {
	data := ev.Object
	if prev {
		data = ev.PrevObject
	}
	if e.r.res.CRD == nil || !e.h.decodesReads(e.r.res) {
		return e.h.decodeServed(e.r.res, data)
	}
	key := e.r.res.Version + "/object"
	if prev {
		key = e.r.res.Version + "/prev"
	}
	served, err := ev.MemoNamed(key, func() ([]byte, error) {
		obj, err := e.h.decodeServed(e.r.res, data)
		if err != nil {
			return nil, err
		}
		return json.Marshal(obj)
	})
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(served); err != nil {
		return nil, fmt.Errorf("cannot decode a converted %s: %w", e.r.res.Kind, err)
	}
	return u, nil
}

// selected frames d for a watch whose selectors apply to served objects
// (selectsServed): the hub selected only by namespace, so the event's
// object and previous state are selected here, once converted, and
// classified as the hub classifies stored ones (moved into the selection:
// ADDED; moved out: DELETED with the previous state at the event's
// revision). It returns nil for an event the watch does not see.
func (e *watchEncoder) selected(d watchhub.Delivery, ls labels.Selector, fs fields.Selector) ([]byte, error) {
	if d.Type != watchhub.Added && d.Type != watchhub.Modified && d.Type != watchhub.Deleted {
		return e.delivery(d)
	}
	cur, err := e.servedEvent(d.Event, d.UsePrev)
	if err != nil {
		return nil, err
	}
	in, err := e.h.matches(e.r, cur, ls, fs)
	if err != nil {
		return nil, err
	}
	if d.Type != watchhub.Modified || d.UsePrev || d.Event.PrevObject == nil {
		if !in {
			return nil, nil
		}
		return e.object(eventType(d.Type), cur)
	}
	prev, err := e.servedEvent(d.Event, true)
	if err != nil {
		return nil, err
	}
	was, err := e.h.matches(e.r, prev, ls, fs)
	if err != nil {
		return nil, err
	}
	switch {
	case in && was:
		return e.object(watch.Modified, cur)
	case in:
		return e.object(watch.Added, cur)
	case was:
		m, err := objectMeta(prev)
		if err != nil {
			return nil, err
		}
		m.SetResourceVersion(strconv.FormatInt(d.Rev, 10))
		return e.object(watch.Deleted, prev)
	}
	return nil, nil
}

// item frames one object of an initial list as read from a cache node in
// format f.
func (e *watchEncoder) item(t watch.EventType, data []byte, f client.Format) ([]byte, error) {
	switch {
	case f == client.Protobuf:
		return negotiate.AppendWatchProtobuf(nil, t, e.r.res.APIVersion(), e.r.res.Kind, data), nil
	case e.memoizable() && !e.h.decodesReads(e.r.res):
		return negotiate.AppendWatchJSON(nil, t, data), nil
	}
	obj, err := e.h.decodeServed(e.r.res, data)
	if err != nil {
		return nil, err
	}
	return e.object(t, obj)
}

// object frames a typed object of the served kind in the watch's media.
func (e *watchEncoder) object(t watch.EventType, obj runtime.Object) ([]byte, error) {
	var out runtime.Object = obj
	switch e.r.media.As {
	case negotiate.AsTable:
		tbl, err := e.h.objectTable(e.r, obj)
		if err != nil {
			return nil, err
		}
		if m, err := objectMeta(obj); err == nil {
			tbl.ResourceVersion = m.GetResourceVersion()
		}
		if e.tableSent {
			tbl.ColumnDefinitions = nil
		}
		e.tableSent = true
		out = tbl
	case negotiate.AsPartialObjectMetadata, negotiate.AsPartialObjectMetadataList:
		m, err := objectMeta(obj)
		if err != nil {
			return nil, err
		}
		out = partial(e.r, m, e.r.media.AsVersion)
	}
	if e.r.media.Format == negotiate.Protobuf {
		if out == obj {
			raw, err := e.h.cfg.StorageCodec.EncodeRawProtobuf(obj)
			if err != nil {
				return nil, err
			}
			return negotiate.AppendWatchProtobuf(nil, t, e.r.res.APIVersion(), e.r.res.Kind, raw), nil
		}
		env, err := e.h.cfg.Codec.Encode(out, negotiate.Protobuf, false)
		if err != nil {
			return nil, err
		}
		return negotiate.AppendWatchProtobufObject(nil, t, env), nil
	}
	body, err := e.h.cfg.Codec.Encode(out, negotiate.JSON, false)
	if err != nil {
		return nil, err
	}
	return negotiate.AppendWatchJSON(nil, t, body), nil
}

// bookmark frames a BOOKMARK: an empty object of the kind carrying only
// the resourceVersion (and the end-of-initial-events annotation).
func (e *watchEncoder) bookmark(rev int64, initialEnd bool) ([]byte, error) {
	obj, err := e.h.cfg.Registry.New(e.r.res)
	if err != nil {
		return nil, err
	}
	m, err := objectMeta(obj)
	if err != nil {
		return nil, err
	}
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	if initialEnd {
		m.SetAnnotations(map[string]string{initialEventsEnd: "true"})
	}
	if e.r.media.As == negotiate.AsObject {
		return e.object(watch.Bookmark, obj)
	}
	// Converted watches still get bookmarks as the plain kind's metadata.
	p := partial(e.r, m, e.r.media.AsVersion)
	if e.r.media.Format == negotiate.Protobuf {
		env, err := e.h.cfg.Codec.Encode(p, negotiate.Protobuf, false)
		if err != nil {
			return nil, err
		}
		return negotiate.AppendWatchProtobufObject(nil, watch.Bookmark, env), nil
	}
	body, err := e.h.cfg.Codec.Encode(p, negotiate.JSON, false)
	if err != nil {
		return nil, err
	}
	return negotiate.AppendWatchJSON(nil, watch.Bookmark, body), nil
}

func (e *watchEncoder) status(st *metav1.Status) ([]byte, error) {
	if e.r.media.Format == negotiate.Protobuf {
		env, err := e.h.cfg.Codec.Encode(st, negotiate.Protobuf, false)
		if err != nil {
			return nil, fmt.Errorf("cannot encode status: %w", err)
		}
		return negotiate.AppendWatchProtobufObject(nil, watch.Error, env), nil
	}
	body, err := e.h.cfg.Codec.Encode(st, negotiate.JSON, false)
	if err != nil {
		return nil, fmt.Errorf("cannot encode status: %w", err)
	}
	return negotiate.AppendWatchJSON(nil, watch.Error, body), nil
}
