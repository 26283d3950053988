// Package archtest holds tests that check the repository's own rules, so
// that `make test` enforces them: every package has a doc comment and a
// row in ARCHITECTURE.md, the layers import only what they may (storage
// below cachenode below gateway; none of kube-apiserver's server, generic
// registry or watch cache), and a metav1.Status is built only in
// gateway/internal/apierror. It has no code besides its tests.
package archtest
