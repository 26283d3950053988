package readiness

import (
	"context"
	"fmt"
	"testing"

	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/storagetest"
)

// TestReadinessFollowsTable: /readyz requires the ranges the gateway
// started with, and a range added at run time only once it was served: a
// new resource does not make the gateway unready while its cache nodes
// sync it, but losing it after it was served does.
func TestReadinessFollowsTable(t *testing.T) {
	reg, cm := storagetest.RegistryWithout(t, "configmaps")
	table, err := ranges.Follow(reg, ranges.Config{})
	if err != nil {
		t.Fatal(err)
	}
	start := table.Current()
	served := map[string]bool{}
	for _, rng := range start.All() {
		served[rng.ID] = true
	}
	var asked [][]string
	ready := func(_ context.Context, ids []string) error {
		asked = append(asked, ids)
		for _, id := range ids {
			if !served[id] {
				return fmt.Errorf("range %s: not served", id)
			}
		}
		return nil
	}
	rd := New(start)
	f := func(step string, wantReady bool) {
		t.Helper()
		asked = nil
		err := rd.Check(context.Background(), table.Current(), ready)
		if (err == nil) != wantReady {
			t.Fatalf("%s: check = %v, want ready %v", step, err, wantReady)
		}
	}

	f("every range served", true)
	served["pods"] = false
	f("a range of the start not served", false)
	served["pods"] = true

	if err := reg.Add(cm); err != nil {
		t.Fatal(err)
	}
	if _, ok := table.Current().ByID("configmaps"); !ok {
		t.Fatal("the table has no configmaps range after Add")
	}
	f("a range added, not yet served", true)
	if len(asked) != 2 || len(asked[0]) != 1 || asked[0][0] != "configmaps" || len(asked[1]) != len(start.All()) {
		t.Fatalf("asked %v: want configmaps alone, then the %d ranges of the start", asked, len(start.All()))
	}
	served["configmaps"] = true
	f("the added range served", true)
	served["configmaps"] = false
	f("the added range lost after it was served", false)

	if err := reg.Remove(cm.GVR()); err != nil {
		t.Fatal(err)
	}
	f("the added range removed", true)
	if err := reg.Add(cm); err != nil {
		t.Fatal(err)
	}
	f("added again, not yet served: a new range", true)

	served["pods"] = false
	f("a range of the start not served after the changes", false)
}
