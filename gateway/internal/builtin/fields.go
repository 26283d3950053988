package builtin

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kgate/kgate/storage/registry"
)

// Scheme returns the upstream scheme the semantics use (internal and
// versioned types, conversions, defaulters), for the field manager, which
// converts, defaults and creates objects through it. Callers must not
// register anything in it.
func (s *Semantics) Scheme() *runtime.Scheme { return s.scheme }

// ResetFields returns the fields the strategy of res's subresource ("" for
// the resource itself, "status", ...) resets, as upstream's installer gives
// them to the field manager: the strategy's GetResetFields as exclude
// filters, or its GetResetFieldsFilter. Nil when the strategy resets
// nothing, and for "scale", which upstream serves without a strategy of its
// own.
func (s *Semantics) ResetFields(res *registry.Resource, subresource string) (map[fieldpath.APIVersion]fieldpath.Filter, error) {
	if subresource == "scale" {
		return nil, nil
	}
	st, err := s.lookup(res, subresource)
	if err != nil {
		return nil, err
	}
	var strat any = st.main
	if subresource != "" {
		sub, ok := st.sub[subresource]
		if !ok {
			return nil, fmt.Errorf("cannot read the reset fields of %s/%s: %w", res.Resource, subresource, ErrSubresource)
		}
		strat = sub
	}
	switch r := strat.(type) {
	case rest.ResetFieldsStrategy:
		return fieldpath.NewExcludeFilterSetMap(r.GetResetFields()), nil
	case rest.ResetFieldsFilterStrategy:
		return r.GetResetFieldsFilter(), nil
	}
	return nil, nil
}
