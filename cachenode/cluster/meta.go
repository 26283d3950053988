package cluster

import (
	"encoding/binary"
	"errors"
)

// Metadata travels with every alive message and is capped by memberlist
// at 512 bytes (memberlist.MetaMaxSize); oversize metadata panics inside
// memberlist, so New checks the size first. Layout, compact and
// versioned:
//
//	byte    version (1)
//	byte    role: 1 gateway, 2 cachenode
//	uvarint epoch (start time, Unix ns)
//	uvarint len(read address), then its bytes
//
// A decoder ignores bytes after the fields it knows, so later versions
// may append fields.

const metaVersion = 1

var errBadMeta = errors.New("cluster: malformed member metadata")

type meta struct {
	role     Role
	epoch    int64
	readAddr string
}

func roleCode(r Role) byte {
	switch r {
	case RoleGateway:
		return 1
	case RoleCacheNode:
		return 2
	}
	return 0
}

func codeRole(b byte) Role {
	switch b {
	case 1:
		return RoleGateway
	case 2:
		return RoleCacheNode
	}
	return ""
}

func (m meta) encode() []byte {
	b := make([]byte, 0, 2+binary.MaxVarintLen64*2+len(m.readAddr))
	b = append(b, metaVersion, roleCode(m.role))
	b = binary.AppendUvarint(b, uint64(m.epoch))
	b = binary.AppendUvarint(b, uint64(len(m.readAddr)))
	return append(b, m.readAddr...)
}

func decodeMeta(b []byte) (meta, error) {
	if len(b) < 2 || b[0] < metaVersion {
		return meta{}, errBadMeta
	}
	m := meta{role: codeRole(b[1])}
	b = b[2:]
	epoch, n := binary.Uvarint(b)
	if n <= 0 {
		return meta{}, errBadMeta
	}
	m.epoch = int64(epoch)
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return meta{}, errBadMeta
	}
	m.readAddr = string(b[n : n+int(l)])
	return m, nil
}
