package gateway

import "github.com/kgate/kgate/gateway/internal/admission/upstream"

// DefaultAdmissionPlugins returns the admission plugins a gateway runs
// without EnableAdmissionPlugins and DisableAdmissionPlugins: kube-apiserver
// 1.37's default set that kgate runs, in order (for flag help).
func DefaultAdmissionPlugins() []string { return upstream.Defaults() }
