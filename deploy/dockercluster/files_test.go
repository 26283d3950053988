package dockercluster

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestArchive: the files and directories a container gets belong to the
// images' user, with their modes, parents made on the way.
func TestArchive(t *testing.T) {
	b, err := archive([]File{
		{Path: "/etc/kgate/internal/ca.key", Data: []byte("secret"), Mode: 0o600},
		{Path: "/etc/kgate/internal/ca.crt", Data: []byte("cert"), Mode: 0o644},
		{Path: "/etc/nats/nats.conf", Data: []byte("conf"), Mode: 0o600},
	}, "/data")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if h.Uid != UID || h.Gid != GID {
			t.Errorf("%s owned by %d:%d", h.Name, h.Uid, h.Gid)
		}
		got = append(got, fmt.Sprintf("%s %o %s", h.Name, h.Mode, data))
	}
	want := []string{
		"data/ 700 ",
		"etc/ 755 ", "etc/kgate/ 755 ", "etc/kgate/internal/ 755 ",
		"etc/kgate/internal/ca.crt 644 cert", "etc/kgate/internal/ca.key 600 secret",
		"etc/nats/ 755 ", "etc/nats/nats.conf 600 conf",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("archive:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := archive([]File{{Path: "relative", Mode: 0o600}}); err == nil {
		t.Error("a relative path was archived")
	}
}

func TestConfigValidate(t *testing.T) {
	f := func(name string, cfg Config, wantErr string) {
		t.Helper()
		err := cfg.validate()
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%s: error %v, want %q", name, err, wantErr)
		}
	}
	ok := Config{Name: "kgt-1a2b3c", Dir: "/tmp/x", KgateBin: "/bin/kgate"}
	f("defaults", ok, "")
	bad := ok
	bad.Name = "Upper_case"
	f("bad name", bad, "lower-case")
	bad = ok
	bad.Dir = ""
	f("no dir", bad, "required")
	bad = ok
	bad.Replicas, bad.CacheNodes = 3, 2
	f("replicas above nodes", bad, "Replicas 3 > CacheNodes 2")
	bad = ok
	bad.Gateways = 12
	f("too many", bad, "want 1-9")

	cfg := ok
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Etcd != 3 || cfg.NATS != 3 || cfg.CacheNodes != 3 || cfg.Gateways != 2 || cfg.Replicas != 2 || cfg.Images != DefaultImages("latest") {
		t.Errorf("defaults: %+v", cfg)
	}
}
