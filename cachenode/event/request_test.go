package event

import "testing"

func TestProgressRequest(t *testing.T) {
	for _, rev := range []int64{1, 42, 1 << 50} {
		got, err := ParseProgressRequest(AppendProgressRequest(nil, rev))
		if err != nil || got != rev {
			t.Errorf("round trip of %d = %d, %v", rev, got, err)
		}
	}
	for _, bad := range []string{"", "0", "-3", "x", "12a", "99999999999999999999"} {
		if rev, err := ParseProgressRequest([]byte(bad)); err == nil {
			t.Errorf("ParseProgressRequest(%q) = %d, want an error", bad, rev)
		}
	}
}

func TestRangeOfProgressRequest(t *testing.T) {
	tests := []struct{ subject, want string }{
		{ProgressRequestSubject("pods-g"), "pods-g"},
		{ProgressRequestSubject("configmaps"), "configmaps"},
		{"kgate.progressreq.", ""},
		{"kgate.progressreq.a.b", ""},
		{ProgressSubject("pods"), ""},
		{Subject("pods", "ns"), ""},
	}
	for _, tt := range tests {
		if got := RangeOfProgressRequest(tt.subject); got != tt.want {
			t.Errorf("RangeOfProgressRequest(%q) = %q, want %q", tt.subject, got, tt.want)
		}
	}
}
