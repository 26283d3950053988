package discovery

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
)

// NewVersion returns the version.Info to serve at /version for a gateway
// speaking Kubernetes kubernetes ("v1.37.2") built as kgate version build
// ("0.4.1", a commit, or empty). The kgate build rides in semver build
// metadata ("v1.37.2+kgate.0.4.1"), which kubectl's version skew check
// (util/version.ParseSemantic) accepts and which, unlike a pre-release
// suffix, does not make the version compare lower than v1.37.2. Characters
// semver forbids in build metadata become "-". Major and Minor are those of
// kubernetes; the emulation version is the same and the minimum
// compatibility version one minor lower, as a kube-apiserver reports by
// default. GoVersion, Compiler and Platform describe the running binary.
func NewVersion(kubernetes, build string) (version.Info, error) {
	v, err := utilversion.ParseSemantic(kubernetes)
	if err != nil {
		return version.Info{}, fmt.Errorf("cannot parse Kubernetes version %q: %w", kubernetes, err)
	}
	if v.PreRelease() != "" || v.BuildMetadata() != "" {
		return version.Info{}, fmt.Errorf("cannot use Kubernetes version %q: want a release such as v1.37.2", kubernetes)
	}
	git := "v" + v.String() + "+kgate"
	if build != "" {
		git += "." + sanitizeBuild(build)
	}
	major, minor := strconv.Itoa(int(v.Major())), strconv.Itoa(int(v.Minor()))
	minCompat := strconv.Itoa(max(int(v.Minor())-1, 0))
	return version.Info{
		Major:                 major,
		Minor:                 minor,
		EmulationMajor:        major,
		EmulationMinor:        minor,
		MinCompatibilityMajor: major,
		MinCompatibilityMinor: minCompat,
		GitVersion:            git,
		GitTreeState:          "clean",
		GoVersion:             runtime.Version(),
		Compiler:              runtime.Compiler,
		Platform:              runtime.GOOS + "/" + runtime.GOARCH,
	}, nil
}

// sanitizeBuild makes s valid semver build metadata: dot-separated
// non-empty identifiers of [0-9A-Za-z-].
func sanitizeBuild(s string) string {
	ids := strings.Split(s, ".")
	for i, id := range ids {
		b := []byte(id)
		for j, c := range b {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
				b[j] = '-'
			}
		}
		if len(b) == 0 {
			b = []byte{'-'}
		}
		ids[i] = string(b)
	}
	return strings.Join(ids, ".")
}

// versionBody checks v the way clients will read it and renders it as
// kube-apiserver's /version handler does (indented JSON).
func versionBody(v version.Info) ([]byte, error) {
	sv, err := utilversion.ParseSemantic(v.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("cannot serve version %q: %w", v.GitVersion, err)
	}
	if v.Major != strconv.Itoa(int(sv.Major())) || strings.TrimSuffix(v.Minor, "+") != strconv.Itoa(int(sv.Minor())) {
		return nil, fmt.Errorf("cannot serve version %q: major %q and minor %q disagree with it", v.GitVersion, v.Major, v.Minor)
	}
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("cannot encode version: %w", err)
	}
	return body, nil
}
