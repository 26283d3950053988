package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestGauge(t *testing.T) {
	text := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 123\ngo_goroutines_other 7\n"
	if got := gauge(text, "go_goroutines"); got != 123 {
		t.Errorf("gauge = %d, want 123", got)
	}
	if got := gauge(text, "absent"); got != -1 {
		t.Errorf("absent gauge = %d, want -1", got)
	}
}

func TestFlat(t *testing.T) {
	s := func(min int, member string, mem int64, g int) Sample {
		return Sample{At: t0.Add(time.Duration(min) * time.Minute), Member: member, Memory: mem << 20, Goroutines: g}
	}
	warm := t0.Add(10 * time.Minute)
	for _, tc := range []struct {
		name    string
		samples []Sample
		want    []string
	}{
		{name: "flat after warm-up growth", samples: []Sample{s(0, "gw", 50, 100), s(10, "gw", 200, 400), s(60, "gw", 230, 450)}},
		{name: "memory leak", samples: []Sample{s(10, "gw", 200, 400), s(60, "gw", 400, 400)}, want: []string{"gw: memory grew from 200 MiB to 400 MiB"}},
		{name: "goroutine leak", samples: []Sample{s(10, "cn", 100, 400), s(60, "cn", 100, 900)}, want: []string{"cn: goroutines grew from 400 to 900"}},
		{name: "no goroutine figure", samples: []Sample{s(10, "etcd", 100, -1), s(60, "etcd", 120, -1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := flat(tc.samples, warm)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("flat = %q, want %q", got, tc.want)
			}
		})
	}
}
