package builtin

import "k8s.io/apimachinery/pkg/runtime"

// NewScheme returns a new scheme with upstream's internal and versioned
// types of every built-in group kgate serves and the conversions between
// them, as Semantics uses, for the packages that hand objects to other
// upstream code working on internal types (gateway/internal/table gives
// them to kube-apiserver's printers). Each call builds a scheme of its
// own; build it once.
func NewScheme() (*runtime.Scheme, error) { return newScheme() }
