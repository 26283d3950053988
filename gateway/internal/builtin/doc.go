// Package builtin applies kube-apiserver's own write semantics to the
// built-in resources kgate serves, from k8s.io/kubernetes's packages at the
// version of go.mod's k8s.io libraries (issue 11): the versioned scheme's
// defaulters, conversion to the internal type and back, and the registry
// strategy of the resource (PrepareForCreate/Update, Validate/ValidateUpdate
// with upstream's declarative validation, WarningsOnCreate/Update,
// Canonicalize), per subresource. It returns field errors and warnings;
// turning them into a Status is gateway/internal/apierror's job.
//
// The strategies read process-wide feature gates
// (utilfeature.DefaultFeatureGate); this package never sets them.
package builtin
