package fieldmanager

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/kgate/kgate/gateway/internal/openapi/defs"
)

// NewTypeConverter builds the structured-merge-diff type converter of every
// versioned kind of scheme from the models kube-apiserver builds its own
// from: upstream's OpenAPI definitions of the scheme's kinds and every
// definition they refer to, tagged with their kinds (defs.Schemas), then
// managedfields.NewTypeConverter. It is expensive (tens to hundreds of ms,
// about 20 MB allocated): build it once per process.
func NewTypeConverter(scheme *runtime.Scheme) (managedfields.TypeConverter, error) {
	models, err := defs.Schemas(scheme)
	if err != nil {
		return nil, fmt.Errorf("cannot build the type converter: %w", err)
	}
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		return nil, fmt.Errorf("cannot build the type converter: %w", err)
	}
	return tc, nil
}
