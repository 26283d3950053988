package watchhub

import (
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kgate/kgate/cachenode/event"
)

// Type is the type of a watch event as a client sees it.
type Type uint8

// Watch event types.
const (
	Added Type = iota + 1
	Modified
	Deleted
	Bookmark
)

// String returns the Kubernetes name of t.
func (t Type) String() string {
	switch t {
	case Added:
		return "ADDED"
	case Modified:
		return "MODIFIED"
	case Deleted:
		return "DELETED"
	case Bookmark:
		return "BOOKMARK"
	}
	return "ERROR"
}

// Filter selects the events a watcher sees. Zero values select everything.
type Filter struct {
	Namespace string          // "" = all namespaces
	Labels    labels.Selector // nil = everything
	Fields    fields.Selector // nil = everything
}

func (f *Filter) matches(ns string, l, fl map[string]string) bool {
	if f.Namespace != "" && ns != f.Namespace {
		return false
	}
	if f.Labels != nil && !f.Labels.Empty() && !f.Labels.Matches(labels.Set(l)) {
		return false
	}
	if f.Fields != nil && !f.Fields.Empty() && !f.Fields.Matches(fields.Set(fl)) {
		return false
	}
	return true
}

// classify decides what a watcher with filter f sees of ev, following
// kube-apiserver's watch cache: an update that moves an object into the
// selection is ADDED, one that moves it out is DELETED carrying the previous
// state. usePrev says the object to send is ev.PrevObject with its
// resourceVersion set to ev.Revision. ok is false when the watcher sees
// nothing.
func (f *Filter) classify(ev *event.Event) (t Type, usePrev, ok bool) {
	switch ev.Type {
	case event.Added:
		return Added, false, f.matches(ev.Namespace, ev.Labels, ev.Fields)
	case event.Deleted:
		return Deleted, false, f.matches(ev.Namespace, ev.Labels, ev.Fields)
	case event.Modified:
		cur := f.matches(ev.Namespace, ev.Labels, ev.Fields)
		prev := ev.PrevObject != nil && f.matches(ev.Namespace, ev.PrevLabels, ev.PrevFields)
		switch {
		case cur && prev:
			return Modified, false, true
		case cur:
			return Added, false, true
		case prev:
			return Deleted, true, true
		}
	}
	return 0, false, false
}
