package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		name, level, format string
		v                   int
		debug, json         bool
		err                 string
	}{
		{name: "defaults", level: "info", format: "text"},
		{name: "json", level: "info", format: "json", json: true},
		{name: "debug level", level: "debug", format: "text", debug: true},
		{name: "-v 4 is debug", level: "info", format: "text", v: 4, debug: true},
		{name: "-v 2 is not", level: "info", format: "json", v: 2, json: true},
		{name: "bad format", level: "info", format: "xml", err: "--logging-format"},
		{name: "bad level", level: "loud", format: "text", err: "--log-level"},
		{name: "bad -v", level: "info", format: "text", v: -1, err: "-v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := newLogger(&buf, tc.level, tc.format, tc.v)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("d")
			log.Info("i")
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if want := map[bool]int{true: 2, false: 1}[tc.debug]; len(lines) != want {
				t.Errorf("%d lines, want %d: %q", len(lines), want, buf.String())
			}
			if isJSON := json.Valid([]byte(lines[0])); isJSON != tc.json {
				t.Errorf("line %q: JSON %v, want %v", lines[0], isJSON, tc.json)
			}
		})
	}
}
