package promtext

import "testing"

func TestValue(t *testing.T) {
	in := []byte(`# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 1.2345e+07
go_memstats_heap_inuse_bytes_total 99
apiserver_request_total{code="200",verb="GET"} 10
apiserver_request_total{code="404",verb="GET",path="a}b"} 5 1700000000000
`)
	f := func(name string, want float64, wantOK bool) {
		t.Helper()
		got, ok := Value(in, name)
		if got != want || ok != wantOK {
			t.Errorf("Value(%q) = %v, %v; want %v, %v", name, got, ok, want, wantOK)
		}
	}
	f("go_memstats_heap_inuse_bytes", 1.2345e7, true)
	f("apiserver_request_total", 15, true)
	f("go_memstats", 0, false)
	f("process_resident_memory_bytes", 0, false)
}
