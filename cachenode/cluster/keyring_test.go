package cluster

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/kgate/kgate/storage/storagetest"
)

func TestParseKeys(t *testing.T) {
	k16, k32 := bytes.Repeat([]byte{1}, 16), bytes.Repeat([]byte{2}, 32)
	b64 := base64.StdEncoding.EncodeToString
	f := func(name, in string, want [][]byte) {
		t.Run(name, func(t *testing.T) {
			got, err := ParseKeys([]byte(in))
			if want == nil {
				if !errors.Is(err, ErrBadKey) {
					t.Fatalf("ParseKeys = %v, %v; want ErrBadKey", got, err)
				}
				return
			}
			if err != nil || len(got) != len(want) {
				t.Fatalf("ParseKeys = %v, %v; want %v", got, err, want)
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("key %d = %x, want %x", i, got[i], want[i])
				}
			}
		})
	}
	f("one", b64(k32)+"\n", [][]byte{k32})
	f("primary first, comments and blanks skipped", "# rotation\n"+b64(k16)+"\n\n  "+b64(k32)+"  \n", [][]byte{k16, k32})
	f("empty", "", nil)
	f("only comments", "# nothing\n", nil)
	f("not base64", "not-a-key!\n", nil)
	f("wrong length", b64([]byte("short"))+"\n", nil)
}

// TestKeyring: members sharing a key gossip; during a rotation a member
// with [old, new] (new added, not yet primary) and one with [old] still form one cluster; a member
// without the key, or with another one, cannot join.
func TestKeyring(t *testing.T) {
	if testing.Short() {
		t.Skip("starts memberlist members: skipped under -short")
	}
	oldKey, newKey, other := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32)
	a := start(t, Config{Name: "a", Role: RoleGateway, Keys: [][]byte{oldKey}})
	b := start(t, Config{Name: "b", Role: RoleGateway, Keys: [][]byte{oldKey, newKey}, Join: []string{a.Addr()}})
	storagetest.Eventually(t, 5*time.Second, "membership", sees(a, "a", "b"))
	storagetest.Eventually(t, 5*time.Second, "membership", sees(b, "a", "b"))

	for name, keys := range map[string][][]byte{"no key": nil, "another key": {other}} {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Name: "intruder", Role: RoleGateway, BindAddr: "127.0.0.1:0", Keys: keys, Timing: Fast()}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if n, err := c.ml.Join([]string{a.Addr(), b.Addr()}); err == nil || n != 0 {
				t.Fatalf("Join = %d, %v; want no member reached", n, err)
			}
			if got := names(c.Members()); len(got) > 1 {
				t.Fatalf("intruder sees %v", got)
			}
		})
	}
	storagetest.Eventually(t, 5*time.Second, "membership", sees(a, "a", "b"))
}
