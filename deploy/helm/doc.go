// Package helm checks kgate's Helm chart (deploy/helm/kgate) and the
// kustomize base rendered from it (deploy/kubernetes): helm lint and
// template with the default values and with every option on, each
// rendered object decoded strictly into its k8s.io/api type, the pods'
// security context, probes, GOMEMLIMIT and flags, the checked-in base
// equal to a fresh render, and every metric the dashboards and alerts
// query exported by kgate (or etcd). It has no code besides its tests,
// which need HELM_BIN, KUBECTL_BIN and KGATE_BIN (make test sets them)
// and skip, saying so, without them.
package helm
