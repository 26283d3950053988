package apf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	flowcontrolapplyv1 "k8s.io/client-go/applyconfigurations/flowcontrol/v1"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// Store is what the status writes need of storage.Store.
type Store interface {
	Update(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error)
}

// Fields applies a server-side apply patch (fieldmanager.Managers).
type Fields interface {
	Apply(res *registry.Resource, subresource string, live runtime.Object, patch []byte, manager string, force bool) (runtime.Object, error)
}

// statusClient is the typed client upstream's controller is given. It
// calls only FlowSchemas().ApplyStatus; the embedded interfaces are nil,
// so any other method would panic rather than pretend.
type statusClient struct {
	flowcontrolclient.FlowcontrolV1Interface
	s *statusWriter
}

func (c statusClient) FlowSchemas() flowcontrolclient.FlowSchemaInterface { return fsStatus{s: c.s} }

type fsStatus struct {
	flowcontrolclient.FlowSchemaInterface
	s *statusWriter
}

// statusWriter applies status patches of FlowSchemas through the store.
type statusWriter struct {
	store  Store
	fields Fields
	res    *registry.Resource
}

// ApplyStatus is the controller's server-side apply of a FlowSchema's
// status, done as kube-apiserver's status subresource would: the patch
// merged into the stored object by the field manager, the spec kept.
func (c fsStatus) ApplyStatus(ctx context.Context, fs *flowcontrolapplyv1.FlowSchemaApplyConfiguration, opts metav1.ApplyOptions) (*flowcontrolv1.FlowSchema, error) {
	if fs == nil || fs.Name == nil {
		return nil, errors.New("cannot apply FlowSchema status: no name")
	}
	patch, err := json.Marshal(fs)
	if err != nil {
		return nil, fmt.Errorf("cannot apply FlowSchema status: %w", err)
	}
	s := c.s
	got, err := s.store.Update(ctx, s.res, "", *fs.Name, storage.Preconditions{}, func(live runtime.Object) (runtime.Object, error) {
		old, ok := live.(*flowcontrolv1.FlowSchema)
		if !ok {
			return nil, fmt.Errorf("stored FlowSchema is a %T", live)
		}
		out, err := s.fields.Apply(s.res, "status", live, patch, opts.FieldManager, opts.Force)
		if err != nil {
			return nil, err
		}
		applied, ok := out.(*flowcontrolv1.FlowSchema)
		if !ok {
			return nil, fmt.Errorf("applied FlowSchema is a %T", out)
		}
		applied.Spec = old.Spec
		return applied, nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot apply FlowSchema %s status: %w", *fs.Name, apierror.StatusError(err, s.res.GVR().GroupResource(), *fs.Name))
	}
	out, ok := got.(*flowcontrolv1.FlowSchema)
	if !ok {
		return nil, fmt.Errorf("stored FlowSchema is a %T", got)
	}
	return out, nil
}
