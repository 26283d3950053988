package main

import "testing"

func TestGCTarget(t *testing.T) {
	tests := []struct {
		name    string
		percent int
		envSet  bool
		want    int
		set     bool
		err     bool
	}{
		{name: "the cache node's default", percent: defaultCachenodeGCPercent, want: 25, set: true},
		{name: "off", percent: -1, want: -1, set: true},
		{name: "GOGC rules", percent: 25, envSet: true},
		{name: "zero refused", percent: 0, err: true},
		{name: "below -1 refused", percent: -2, err: true},
		{name: "refused even under GOGC", percent: 0, envSet: true, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, set, err := gcTarget(tt.percent, tt.envSet)
			if (err != nil) != tt.err || set != tt.set || (set && got != tt.want) {
				t.Fatalf("gcTarget(%d, %v) = %d, %v, %v", tt.percent, tt.envSet, got, set, err)
			}
		})
	}
}
