package dockercluster

import "testing"

func TestParseMemUsage(t *testing.T) {
	got, err := parseMemUsage("a\t12.5MiB / 23.4GiB\nb\t1.2GiB / 23.4GiB\nc\t512KiB / 1GiB\nd\t100B / 1GiB\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"a": 13107200, "b": 1288490189, "c": 524288, "d": 100}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	if _, err := parseMemUsage("garbage"); err == nil {
		t.Error("a line without a tab parsed")
	}
}
