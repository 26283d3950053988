package feed

import (
	"errors"

	"k8s.io/apimachinery/pkg/runtime"
)

// Tee is a sink that hands everything to each of its sinks in turn: two
// readers of one resource share one feed of it.
type Tee []Sink

// Replace implements Sink.
func (t Tee) Replace(objs []runtime.Object) {
	for _, s := range t {
		s.Replace(objs)
	}
}

// Upsert implements Sink.
func (t Tee) Upsert(obj runtime.Object) error {
	var errs []error
	for _, s := range t {
		errs = append(errs, s.Upsert(obj))
	}
	return errors.Join(errs...)
}

// Delete implements Sink.
func (t Tee) Delete(obj runtime.Object) error {
	var errs []error
	for _, s := range t {
		errs = append(errs, s.Delete(obj))
	}
	return errors.Join(errs...)
}
