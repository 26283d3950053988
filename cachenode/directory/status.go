// Package directory tells gateways and cache nodes who serves what. Each
// cache node's Publisher announces, every second and on change, the ranges
// it reflects — ready or not, the revision it has seen, whether it is the
// range's primary (the one publishing its events) — on NATS subject
// "kgate.status.<node>". A Directory collects those announcements and
// answers "which ready replicas serve range X, best first".
//
// Membership (package cluster) says who is alive and who should own a
// range; the directory says who actually can serve it now: during a
// handoff the old owner keeps serving until the new one is ready.
package directory

import (
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// SubjectPrefix starts the subject each node publishes its status on.
const SubjectPrefix = "kgate.status."

// ProbeSubject: a message here asks every publisher to announce itself at
// once (a directory that just started need not wait a whole interval).
const ProbeSubject = "kgate.statusprobe"

// RangeStatus is one range a node reflects.
type RangeStatus struct {
	ID string
	// Ready: the reflector has listed the range and follows its watch.
	Ready bool
	// Seen is the etcd revision the range has seen up to.
	Seen int64
	// Primary: this node publishes the range's events on NATS.
	Primary bool
}

// NodeStatus is the last status heard from a node.
type NodeStatus struct {
	Node     string
	ReadAddr string
	Epoch    int64 // start time, Unix ns
	Ranges   []RangeStatus
	Heard    time.Time // local time the status arrived
}

// Replica is a node serving a range.
type Replica struct {
	Node     string
	ReadAddr string
	Seen     int64
	Primary  bool
}

// Subject returns the subject node publishes on: characters NATS gives a
// meaning to ('.', '*', '>', whitespace) become '_'. The message carries the
// real name.
func Subject(node string) string {
	return SubjectPrefix + strings.Map(func(r rune) rune {
		if r == '.' || r == '*' || r == '>' || r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, node)
}

// wireStatus is the JSON of a status message; short keys, zero values
// omitted: a node with 150 ranges sends ~6 KB a second.
type wireStatus struct {
	Version  int         `json:"v"`
	Node     string      `json:"n"`
	ReadAddr string      `json:"a"`
	Epoch    int64       `json:"e"`
	Gone     bool        `json:"x,omitempty"` // the node stops: forget it now
	Ranges   []wireRange `json:"r,omitempty"`
}

type wireRange struct {
	ID      string `json:"i"`
	Ready   bool   `json:"y,omitempty"`
	Seen    int64  `json:"s,omitempty"`
	Primary bool   `json:"p,omitempty"`
}

const wireVersion = 1

var errMalformed = errors.New("directory: malformed status")

func encodeStatus(node, readAddr string, epoch int64, gone bool, rs []RangeStatus) ([]byte, error) {
	w := wireStatus{Version: wireVersion, Node: node, ReadAddr: readAddr, Epoch: epoch, Gone: gone}
	if !gone {
		w.Ranges = make([]wireRange, len(rs))
		for i, r := range rs {
			w.Ranges[i] = wireRange(r)
		}
	}
	return json.Marshal(w)
}

// decodeStatus parses a status message and checks what the directory
// relies on; duplicate range ids keep their first entry.
func decodeStatus(b []byte) (wireStatus, error) {
	var w wireStatus
	if err := json.Unmarshal(b, &w); err != nil {
		return wireStatus{}, errors.Join(errMalformed, err)
	}
	if w.Version < 1 || w.Node == "" || (w.ReadAddr == "" && !w.Gone) || w.Epoch < 0 {
		return wireStatus{}, errMalformed
	}
	seen := make(map[string]bool, len(w.Ranges))
	rs := w.Ranges[:0]
	for _, r := range w.Ranges {
		if r.ID == "" || seen[r.ID] || r.Seen < 0 {
			continue
		}
		seen[r.ID] = true
		rs = append(rs, r)
	}
	w.Ranges = rs
	return w, nil
}
