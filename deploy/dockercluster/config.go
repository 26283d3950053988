package dockercluster

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"
)

// Roles, as they appear in container names: <Name>-<role>-<index>.
const (
	Etcd      = "etcd"
	NATS      = "nats"
	CacheNode = "cachenode"
	Gateway   = "gateway"
)

// Images are the images of the roles, built FROM scratch by `make images`
// (deploy/images); never pulled.
type Images struct {
	Kgate, Etcd, NATS string
}

// DefaultImages are make images' tags with TAG=tag.
func DefaultImages(tag string) Images {
	return Images{Kgate: "kgate/kgate:" + tag, Etcd: "kgate/etcd:" + tag, NATS: "kgate/nats-server:" + tag}
}

// Config describes a cluster.
type Config struct {
	// Name prefixes every container and the network, and labels them
	// (LabelKey=Name): unique per run, so that concurrent runs never
	// touch each other's containers. Lower-case letters, digits and '-'.
	// Required.
	Name string
	// Dir is a host directory for the certificates. Required.
	Dir string
	// KgateBin is the kgate binary that writes the certificates (kgate
	// pki); the one in Images.Kgate. Required.
	KgateBin string
	// Images; default DefaultImages("latest").
	Images Images
	// Members of each role; defaults 3 etcd, 3 NATS, 3 cache nodes, 2
	// gateways.
	Etcd, NATS, CacheNodes, Gateways int
	// Replicas is the cache nodes owning each range; default 2.
	Replicas int
	// ShutdownDelay is the gateways' --shutdown-delay-duration; default
	// 2s.
	ShutdownDelay time.Duration
	// ReadyTimeout bounds each wait for a member to be ready; default 3m
	// (eleven containers start on a shared machine).
	ReadyTimeout time.Duration
	// Docker is the docker CLI; default "docker".
	Docker string
	// Logger; default discards.
	Logger *slog.Logger
}

// LabelKey labels every container and network a Cluster creates with its
// Name; Remove finds them by it.
const LabelKey = "io.kgate.dockercluster"

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,30}$`)

func (c *Config) validate() error {
	if !validName.MatchString(c.Name) {
		return fmt.Errorf("cannot make cluster: Name %q: want 1-31 lower-case letters, digits and '-'", c.Name)
	}
	if c.Dir == "" || c.KgateBin == "" {
		return errors.New("cannot make cluster: Dir and KgateBin are required")
	}
	if c.Images == (Images{}) {
		c.Images = DefaultImages("latest")
	}
	if c.Images.Kgate == "" || c.Images.Etcd == "" || c.Images.NATS == "" {
		return errors.New("cannot make cluster: Images needs all three images")
	}
	for _, d := range []struct {
		n   *int
		def int
	}{{&c.Etcd, 3}, {&c.NATS, 3}, {&c.CacheNodes, 3}, {&c.Gateways, 2}, {&c.Replicas, 2}} {
		if *d.n == 0 {
			*d.n = d.def
		}
		if *d.n < 0 || *d.n > 9 {
			return fmt.Errorf("cannot make cluster: %d members of a role: want 1-9", *d.n)
		}
	}
	if c.Replicas > c.CacheNodes {
		return fmt.Errorf("cannot make cluster: Replicas %d > CacheNodes %d", c.Replicas, c.CacheNodes)
	}
	if c.ShutdownDelay == 0 {
		c.ShutdownDelay = 2 * time.Second
	}
	if c.ShutdownDelay < 0 {
		return errors.New("cannot make cluster: ShutdownDelay must not be negative")
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 3 * time.Minute
	}
	if c.Docker == "" {
		c.Docker = "docker"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
