package chaos

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/kgate/kgate/deploy/watchcheck"
)

// KVOp is one operation on one ConfigMap, as the linearizability checker
// sees it: a write that made the version RV (0: deleted it), or a
// consistent GET that returned the version RV (0: NotFound).
type KVOp struct {
	Key string
	// Write: the operation changed the key; else it read it.
	Write bool
	RV    int64
	// Rev is a write's revision (a delete's too); 0 for reads.
	Rev int64
	// Call and Return bound the operation in the client's time. A write
	// whose answer was lost (a timeout, a reset) but that etcd applied
	// returns when the writer found it in etcd.
	Call, Return time.Time
	Client       int
}

// kvModel is a register per key: its state is the revision of the
// version stored, 0 for none. Writes always succeed (etcd ordered them,
// and a write the client knows nothing of is settled from etcd); a read
// is legal when it returns the state.
var kvModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(KVOp).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(KVOp)
		if in.Write {
			return true, in.RV
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(KVOp)
		if in.Write {
			return fmt.Sprintf("write %s -> %d", in.Key, in.RV)
		}
		return fmt.Sprintf("get %s = %d", in.Key, output.(int64))
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%d", state.(int64)) },
}

// Linearizable checks the consistent GETs among ops against the writes
// among them with porcupine, within timeout. It returns "ok", "violation"
// or "unknown" (timed out), and on a violation writes porcupine's
// visualisation to vis when vis is not empty.
func Linearizable(ops []KVOp, timeout time.Duration, vis string) (string, error) {
	h := make([]porcupine.Operation, 0, len(ops))
	var t0 time.Time
	for _, op := range ops {
		if t0.IsZero() || op.Call.Before(t0) {
			t0 = op.Call
		}
	}
	for _, op := range ops {
		h = append(h, porcupine.Operation{
			ClientId: op.Client, Input: op, Output: op.RV,
			Call: op.Call.Sub(t0).Nanoseconds(), Return: op.Return.Sub(t0).Nanoseconds(),
		})
	}
	res, info := porcupine.CheckOperationsVerbose(kvModel, h, timeout)
	switch res {
	case porcupine.Ok:
		return "ok", nil
	case porcupine.Illegal:
		if vis != "" {
			if err := porcupine.VisualizePath(kvModel, info, vis); err != nil {
				return "violation", fmt.Errorf("cannot write the linearizability visualisation: %w", err)
			}
		}
		return "violation", nil
	}
	return "unknown", nil
}

// ListCheck checks one consistent LIST of the namespace the writes
// change: it returned the state at its revision exactly, and that
// revision is not older than the newest write acknowledged before the
// LIST was sent (ackedBefore). A write sent after the LIST returned
// cannot have a revision at or below it, so the exact state also rules
// out reading the future.
func ListCheck(writes []watchcheck.Write, rev, ackedBefore int64, got map[string]*watchcheck.Object) error {
	if rev < ackedBefore {
		return fmt.Errorf("consistent LIST at revision %d, older than the write acknowledged before it at %d", rev, ackedBefore)
	}
	want := watchcheck.StateAt(writes, rev)
	if len(want) != len(got) {
		return fmt.Errorf("consistent LIST at revision %d has %d objects, the history %d", rev, len(got), len(want))
	}
	for k, o := range got {
		w := want[k]
		if w == nil || w.RV != o.RV || w.Data != o.Data {
			return fmt.Errorf("consistent LIST at revision %d has %s at %d, the history %v", rev, k, o.RV, w)
		}
	}
	return nil
}

// StaleGets explains a linearizability violation in a client's terms:
// every consistent GET that returned a version older than one a write
// acknowledged before the GET was sent had made (or NotFound after such a
// create or update, or an object after such a delete).
func StaleGets(ops []KVOp) []string {
	type w struct {
		ret     time.Time
		rev, rv int64
	}
	writes := map[string][]w{}
	for _, op := range ops {
		if op.Write && op.Rev > 0 {
			writes[op.Key] = append(writes[op.Key], w{op.Return, op.Rev, op.RV})
		}
	}
	var out []string
	for _, op := range ops {
		if op.Write {
			continue
		}
		var newest *w
		concurrent := false
		for i, x := range writes[op.Key] {
			if x.ret.Before(op.Call) && (newest == nil || x.rev > newest.rev) {
				newest = &writes[op.Key][i]
			}
		}
		for _, x := range ops {
			if x.Write && x.Key == op.Key && !x.Call.After(op.Return) && !x.Return.Before(op.Call) {
				concurrent = true // the GET may see it or not
			}
		}
		if newest == nil || concurrent {
			continue
		}
		// The GET saw version op.RV (0: none); the newest write
		// acknowledged before it made newest.rv at newest.rev.
		if op.RV != newest.rv && op.RV < newest.rev {
			out = append(out, fmt.Sprintf("consistent GET %s sent %s returned version %d; the write at revision %d (version %d) was acknowledged %v before it was sent",
				op.Key, op.Call.Format("15:04:05.000"), op.RV, newest.rev, newest.rv, op.Call.Sub(newest.ret).Round(time.Millisecond)))
		}
	}
	return out
}
