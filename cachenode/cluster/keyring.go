package cluster

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/memberlist"
)

// ErrBadKey: a key of the gossip keyring is not 16, 24 or 32 bytes of
// base64, or the keyring is empty.
var ErrBadKey = errors.New("cluster: bad gossip key")

// ReadKeyFile reads a gossip keyring: one base64 key (16, 24 or 32 bytes:
// AES-128, -192 or -256) per line, the first the primary. Blank lines and
// lines starting with '#' are skipped.
//
// Rotation without downtime: add the new key as a second line on every
// member (a rolling restart; everyone still encrypts with the old one and
// accepts both), then move it first (everyone encrypts with the new one),
// then drop the old line.
func ReadKeyFile(name string) ([][]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read gossip keyring: %w", err)
	}
	keys, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("cannot read gossip keyring %s: %w", name, err)
	}
	return keys, nil
}

// ParseKeys parses the content of a key file (see ReadKeyFile).
func ParseKeys(b []byte) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrBadKey, n, err)
		}
		if l := len(k); l != 16 && l != 24 && l != 32 {
			return nil, fmt.Errorf("%w: line %d: %d bytes, want 16, 24 or 32", ErrBadKey, n, l)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrBadKey)
	}
	return keys, nil
}

// keyring builds memberlist's keyring from keys, the first the primary.
func keyring(keys [][]byte) (*memberlist.Keyring, error) {
	for i, k := range keys {
		if l := len(k); l != 16 && l != 24 && l != 32 {
			return nil, fmt.Errorf("%w: key %d: %d bytes, want 16, 24 or 32", ErrBadKey, i, l)
		}
	}
	kr, err := memberlist.NewKeyring(keys, keys[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	return kr, nil
}
