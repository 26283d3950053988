package backend

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/storagetest"
)

func TestOpenValidates(t *testing.T) {
	if _, err := Open(Config{Logger: slog.New(slog.DiscardHandler)}); !errors.Is(err, ErrConfig) {
		t.Fatalf("no etcd: %v, want ErrConfig", err)
	}
}

func TestOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	storagetest.CheckGoroutines(t) // Close stops the compactor
	cli := storagetest.StartEtcd(t)
	log := storagetest.Logger(t)
	f := func(name string, cfg Config, wantErr bool) {
		t.Run(name, func(t *testing.T) {
			cfg.Etcd, cfg.Logger = cli, log
			b, err := Open(cfg)
			if wantErr {
				if err == nil {
					b.Close()
					t.Fatal("opened")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if b.Registry == nil || b.Codec == nil || b.Ranges == nil || b.Store == nil || b.Revisions == nil || b.ServiceIPs == nil {
				t.Fatalf("incomplete backend %+v", b)
			}
			if _, err := b.Revisions.Current(t.Context()); err != nil {
				t.Fatal(err)
			}
			if (b.Compactor != nil) != (cfg.CompactionInterval > 0) {
				t.Fatalf("compactor %v with interval %v", b.Compactor, cfg.CompactionInterval)
			}
		})
	}
	f("defaults", Config{}, false)
	f("splits", Config{Splits: ranges.DefaultSplits()}, false)
	f("bad CIDR", Config{ServiceCIDR: "not a CIDR"}, true)
	f("compactor", Config{CompactionInterval: time.Hour}, false)
	f("negative event TTL", Config{EventTTL: -time.Second}, true)
}
