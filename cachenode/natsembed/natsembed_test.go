package natsembed

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS servers: skipped under -short")
	}
	tests := []struct {
		name       string
		maxPayload int32
		send       int
		wantErr    error
	}{
		{"default max payload carries 3 MiB", 0, 3 << 20, nil},
		{"small max payload refuses", 1 << 20, 2 << 20, nats.ErrMaxPayload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Start(Config{MaxPayload: tt.maxPayload})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			nc, err := nats.Connect(s.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			sub, err := nc.SubscribeSync("x")
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte("a"), tt.send)
			err = nc.Publish("x", data)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Publish = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			msg, err := sub.NextMsg(5 * time.Second)
			if err != nil || len(msg.Data) != tt.send {
				t.Fatalf("NextMsg = %d bytes, %v", len(msg.Data), err)
			}
		})
	}
}

func TestTwoServersOnRandomPorts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS servers: skipped under -short")
	}
	a, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.ClientURL() == b.ClientURL() {
		t.Fatalf("same URL %s", a.ClientURL())
	}
}
