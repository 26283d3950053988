package defaults

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The grammar of image references, as github.com/distribution/reference
// parses them (what kube-apiserver's parsers.ParseImageName uses).
const (
	refAlnum           = `[a-z0-9]+`
	refSeparator       = `(?:[._]|__|[-]+)`
	refPathComponent   = refAlnum + `(?:` + refSeparator + refAlnum + `)*`
	refDomainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	refHost            = `(?:` + refDomainComponent + `(?:\.` + refDomainComponent + `)*|\[[a-fA-F0-9:]+\])`
	refDomain          = refHost + `(?::[0-9]+)?`
	refName            = `(?:` + refDomain + `/)?` + refPathComponent + `(?:/` + refPathComponent + `)*`
	refTag             = `[\w][\w.-]{0,127}`
	refDigest          = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
)

var (
	referenceRE  = regexp.MustCompile(`^(` + refName + `)(?::(` + refTag + `))?(?:@(` + refDigest + `))?$`)
	identifierRE = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// nameMaxLength is the longest repository name a reference may have.
const nameMaxLength = 255

// pullPolicy returns the default pull policy of an image: Always for the
// tag "latest", explicit or implied by a reference with neither tag nor
// digest; IfNotPresent otherwise, also for references that do not parse.
func pullPolicy(image string) corev1.PullPolicy {
	if imageTag(image) == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// imageTag returns the tag of a normalized image reference: "latest" when
// it has neither tag nor digest, "" when it has only a digest or does not
// parse.
func imageTag(image string) string {
	if identifierRE.MatchString(image) {
		return ""
	}
	domain, rest := splitDomain(image)
	remote := rest
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		remote = rest[:i]
	}
	if strings.ToLower(remote) != remote {
		return ""
	}
	m := referenceRE.FindStringSubmatch(domain + "/" + rest)
	if m == nil || len(m[1]) > nameMaxLength {
		return ""
	}
	tag, digest := m[2], m[3]
	if tag == "" && digest == "" {
		return "latest"
	}
	return tag
}

// splitDomain splits a reference into its registry and the rest, adding
// docker.io and library/ as the docker normalization does.
func splitDomain(name string) (domain, rest string) {
	const defaultDomain = "docker.io"
	i := strings.IndexByte(name, '/')
	if i == -1 || (!strings.ContainsAny(name[:i], ".:") && name[:i] != "localhost" && strings.ToLower(name[:i]) == name[:i]) {
		domain, rest = defaultDomain, name
	} else {
		domain, rest = name[:i], name[i+1:]
	}
	if domain == "index.docker.io" {
		domain = defaultDomain
	}
	if domain == defaultDomain && !strings.ContainsRune(rest, '/') {
		rest = "library/" + rest
	}
	return domain, rest
}
