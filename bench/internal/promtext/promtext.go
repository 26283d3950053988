// Package promtext reads single values out of a Prometheus text exposition
// (what /metrics serves), without the client libraries.
package promtext

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// Value returns the sum of every sample of metric name (all label sets)
// and whether there was any.
func Value(exposition []byte, name string) (float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		switch {
		case strings.HasPrefix(rest, "{"):
			i := strings.LastIndexByte(rest, '}')
			if i < 0 {
				continue
			}
			rest = rest[i+1:]
		case strings.HasPrefix(rest, " "), strings.HasPrefix(rest, "\t"):
		default:
			continue // another metric sharing the prefix
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}
