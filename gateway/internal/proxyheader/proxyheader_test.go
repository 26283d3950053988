package proxyheader

import "testing"

func TestForwardable(t *testing.T) {
	for _, tt := range []struct {
		name string
		want bool
	}{
		{"Authorization", false},
		{"authorization", false},
		{"AUTHORIZATION", false},
		{" Authorization ", false},
		{"Proxy-Authorization", false},
		{"Impersonate-User", false},
		{"Impersonate-Group", false},
		{"Impersonate-Uid", false},
		{"Impersonate-Extra-Scopes", false},
		{"impersonate-extra-", false},
		{"X-Remote-User", false},
		{"X-Remote-Group", false},
		{"X-Remote-Uid", false},
		{"X-Remote-Extra-Foo", false},
		{"x-remote-user", false},
		{"X_Remote_User", false},
		{"x_REMOTE-extra_a", false},
		{"X-Stream-Protocol-Version", true},
		{"Sec-WebSocket-Protocol", true},
		{"Upgrade", true},
		{"Connection", true},
		{"Accept", true},
		{"X-Remote", true}, // no identity header has this name
		{"X-Forwarded-For", true},
		{"Content-Type", true},
	} {
		if got := Forwardable(tt.name); got != tt.want {
			t.Errorf("Forwardable(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
