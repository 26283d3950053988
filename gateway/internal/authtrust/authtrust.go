// Package authtrust keeps the kube-system/extension-apiserver-authentication
// ConfigMap as kube-apiserver's clusterauthenticationtrust controller
// does: client-ca-file (the CAs of client certificates) and, when
// request-header authentication is on, requestheader-client-ca-file,
// requestheader-allowed-names, -username-headers, -uid-headers (when
// any), -group-headers and -extra-headers-prefix (JSON string arrays).
// Extension API servers built on k8s.io/apiserver read it to trust the
// gateways' front-proxy requests and their callers' client certificates.
// What the ConfigMap holds is merged with this server's settings, as
// upstream merges every server's: header lists united in order, CA
// bundles united without duplicates or expired certificates. The CA
// files are read again at every pass (every minute), so a rotated CA
// reaches the ConfigMap. Run by the controllers' leader.
package authtrust

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// The ConfigMap's place, kube-apiserver's.
const (
	Namespace = metav1.NamespaceSystem
	Name      = "extension-apiserver-authentication"
)

// DefaultInterval is how often the ConfigMap is checked.
const DefaultInterval = time.Minute

// Info is this server's authentication settings: the --client-ca-file
// and --requestheader-* flags (header lists as the authenticator uses
// them, defaults applied).
type Info struct {
	ClientCAFile        string
	RequestHeaderCAFile string
	AllowedNames        []string
	UsernameHeaders     []string
	UIDHeaders          []string
	GroupHeaders        []string
	ExtraHeaderPrefixes []string
}

// Store is what the controller needs of storage.Store.
type Store interface {
	Create(ctx context.Context, res *registry.Resource, obj runtime.Object) (runtime.Object, error)
	Update(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error)
}

// Config configures a Controller.
type Config struct {
	Store    Store              // required
	Registry *registry.Registry // required
	Logger   *slog.Logger       // required
	Info     Info
	// Interval between passes; default DefaultInterval.
	Interval time.Duration
	// Now is the clock expired certificates are judged by; default
	// time.Now.
	Now func() time.Time
}

// Controller keeps the ConfigMap.
type Controller struct {
	cfg Config
	res *registry.Resource
}

// New checks cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Store == nil || cfg.Registry == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make the cluster authentication trust controller: Store, Registry and Logger are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	res, ok := cfg.Registry.Lookup(corev1.SchemeGroupVersion.WithResource("configmaps"))
	if !ok {
		return nil, errors.New("cannot make the cluster authentication trust controller: configmaps are not served")
	}
	return &Controller{cfg: cfg, res: res}, nil
}

// Run syncs now and every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("cannot sync the extension-apiserver-authentication configmap", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sync merges this server's settings into the ConfigMap, creating it when
// missing; nothing is written when it already holds them.
func (c *Controller) Sync(ctx context.Context) error {
	mine, err := c.load()
	if err != nil {
		return err
	}
	_, err = c.cfg.Store.Update(ctx, c.res, Namespace, Name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		cm, ok := cur.(*corev1.ConfigMap)
		if !ok {
			return nil, fmt.Errorf("configmap %s stored as %T", Name, cur)
		}
		data, err := c.merged(cm.Data, mine)
		if err != nil {
			return nil, err
		}
		if equality.Semantic.DeepEqual(data, cm.Data) {
			return cm, nil
		}
		cm = cm.DeepCopy()
		cm.Data = data
		return cm, nil
	})
	if errors.Is(err, storage.ErrNotFound) {
		var data map[string]string
		if data, err = c.merged(nil, mine); err == nil {
			_, err = c.cfg.Store.Create(ctx, c.res, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name}, Data: data})
		}
	}
	if err != nil {
		return fmt.Errorf("cannot write configmap %s/%s: %w", Namespace, Name, err)
	}
	return nil
}

// settings is one side of a merge (upstream's ClusterAuthenticationInfo).
type settings struct {
	clientCA, requestHeaderCA                             []*x509.Certificate
	allowedNames, username, uid, group, extraHeaderPrefix []string
}

// load reads this server's CA files.
func (c *Controller) load() (settings, error) {
	i := c.cfg.Info
	s := settings{allowedNames: i.AllowedNames, username: i.UsernameHeaders, uid: i.UIDHeaders, group: i.GroupHeaders, extraHeaderPrefix: i.ExtraHeaderPrefixes}
	var err error
	if s.clientCA, err = readCerts(i.ClientCAFile); err != nil {
		return settings{}, err
	}
	if s.requestHeaderCA, err = readCerts(i.RequestHeaderCAFile); err != nil {
		return settings{}, err
	}
	return s, nil
}

func readCerts(file string) ([]*x509.Certificate, error) {
	if file == "" {
		return nil, nil
	}
	pemBytes, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read CA bundle: %w", err)
	}
	certs, err := parseCerts(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("cannot read CA bundle %s: %w", file, err)
	}
	return certs, nil
}

// parseCerts reads the certificates of a PEM bundle.
func parseCerts(pemBytes []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, pemBytes = pem.Decode(pemBytes)
		if block == nil {
			return certs, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, cert)
	}
}

// merged is upstream's getClusterAuthenticationInfoFor(data), combined
// with mine, then getConfigMapDataFor.
func (c *Controller) merged(data map[string]string, mine settings) (map[string]string, error) {
	var have settings
	var err error
	for key, into := range map[string]*[]string{
		"requestheader-allowed-names": &have.allowedNames, "requestheader-username-headers": &have.username,
		"requestheader-uid-headers": &have.uid, "requestheader-group-headers": &have.group,
		"requestheader-extra-headers-prefix": &have.extraHeaderPrefix,
	} {
		if v := data[key]; v != "" {
			if err := json.Unmarshal([]byte(v), into); err != nil {
				return nil, fmt.Errorf("cannot read %s of configmap %s: %w", key, Name, err)
			}
		}
	}
	if have.clientCA, err = parseCerts([]byte(data["client-ca-file"])); err != nil {
		return nil, fmt.Errorf("cannot read client-ca-file of configmap %s: %w", Name, err)
	}
	if have.requestHeaderCA, err = parseCerts([]byte(data["requestheader-client-ca-file"])); err != nil {
		return nil, fmt.Errorf("cannot read requestheader-client-ca-file of configmap %s: %w", Name, err)
	}
	now := c.cfg.Now()
	out := map[string]string{}
	if ca := encode(unexpired(now, have.clientCA, mine.clientCA)); len(ca) > 0 {
		out["client-ca-file"] = string(ca)
	}
	ca := encode(unexpired(now, have.requestHeaderCA, mine.requestHeaderCA))
	if len(ca) == 0 {
		return out, nil
	}
	out["requestheader-client-ca-file"] = string(ca)
	for key, lists := range map[string][2][]string{
		"requestheader-allowed-names": {have.allowedNames, mine.allowedNames}, "requestheader-username-headers": {have.username, mine.username},
		"requestheader-group-headers": {have.group, mine.group}, "requestheader-extra-headers-prefix": {have.extraHeaderPrefix, mine.extraHeaderPrefix},
		"requestheader-uid-headers": {have.uid, mine.uid},
	} {
		list := union(lists[0], lists[1])
		if key == "requestheader-uid-headers" && len(list) == 0 {
			continue // written only when set, as upstream
		}
		b, err := json.Marshal(list)
		if err != nil {
			return nil, fmt.Errorf("cannot encode %s: %w", key, err)
		}
		out[key] = string(b)
	}
	return out, nil
}

// union is upstream's combineUniqueStringSlices: lhs, then what rhs adds,
// never null.
func union(lhs, rhs []string) []string {
	out := []string{}
	for _, s := range append(slices.Clone(lhs), rhs...) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// unexpired is upstream's combineCertLists: both lists, duplicates and
// expired certificates left out, in order.
func unexpired(now time.Time, lists ...[]*x509.Certificate) []*x509.Certificate {
	var out []*x509.Certificate
	for _, list := range lists {
		for _, cert := range list {
			if now.After(cert.NotAfter) || slices.ContainsFunc(out, func(c *x509.Certificate) bool { return bytes.Equal(c.Raw, cert.Raw) }) {
				continue
			}
			out = append(out, cert)
		}
	}
	return out
}

func encode(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}) // writes to memory
	}
	return buf.Bytes()
}
