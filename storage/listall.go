package storage

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage/registry"
)

// Lister reads one page of a resource (Store.List).
type Lister interface {
	List(ctx context.Context, res *registry.Resource, ns string, opts ListOptions) (*ListResult, error)
}

// listAllPage is ListAll's page size.
const listAllPage = 500

// ListAll reads every object of res in ns ("" for all) at one revision,
// page by page, each as T (the resource's Go type), and returns the
// revision: what the controllers of the tier read before each pass.
func ListAll[T runtime.Object](ctx context.Context, l Lister, res *registry.Resource, ns string) ([]T, int64, error) {
	var out []T
	opts := ListOptions{Limit: listAllPage}
	for {
		page, err := l.List(ctx, res, ns, opts)
		if err != nil {
			return nil, 0, fmt.Errorf("cannot list %s: %w", res.GVR().GroupResource(), err)
		}
		for _, obj := range page.Items {
			o, ok := obj.(T)
			if !ok {
				return nil, 0, fmt.Errorf("cannot list %s: stored as %T", res.GVR().GroupResource(), obj)
			}
			out = append(out, o)
		}
		if page.Last == "" {
			return out, page.Revision, nil
		}
		opts.Revision, opts.After = page.Revision, page.Last
	}
}
