package rest

import (
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func (e *watchEncoder) delivery(d watchhub.Delivery) ([]byte, error) {
	t := eventType(d.Type)
	if d.UsePrev {
		obj, err := e.h.decodeServed(e.r.res, d.Event.PrevObject)
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
		obj, err := e.h.decodeServed(e.r.res, d.Event.Object)
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
