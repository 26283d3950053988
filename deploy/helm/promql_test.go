package helm

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// selectors are what one PromQL expression reads: each metric name with
// the label names its matchers use, and the label names of its
// by/without/on/ignoring/group_* clauses.
type selectors struct {
	metrics map[string][]string // metric name → label names matched
	grouped []string            // label names of grouping clauses
}

var (
	identRE    = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	numberRE   = regexp.MustCompile(`^(0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?)`)
	matcherRE  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*`)
	durationRE = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+`)
	// keywords are PromQL's operators and modifiers spelled as words.
	keywords = map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
		"inf": true, "nan": true, "Inf": true, "NaN": true,
	}
	// aggregations may be followed by their grouping before "(".
	aggregations = map[string]bool{
		"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
		"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
	}
	// grouping words take a parenthesised list of label names.
	grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
)

// parsePromQL reads the metric names and label names of a PromQL
// expression with a small tokenizer: strings, numbers, durations, range
// and subquery brackets and @/offset modifiers are skipped; a word
// followed by "(" is a function or aggregation; grouping words take a list
// of labels; any other word is a metric name, with its {matchers}.
// Grafana's variables ($__rate_interval, $namespace) may stand where a
// duration or a string is.
func parsePromQL(expr string) (selectors, error) {
	s := selectors{metrics: map[string][]string{}}
	i := 0
	skipSpace := func() {
		for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
			i++
		}
	}
	for {
		skipSpace()
		if i >= len(expr) {
			return s, nil
		}
		rest := expr[i:]
		switch c := rest[0]; {
		case c == '"' || c == '\'' || c == '`':
			end, err := endOfString(rest)
			if err != nil {
				return s, fmt.Errorf("%w in %q", err, expr)
			}
			i += end
		case c == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return s, fmt.Errorf("unclosed [ in %q", expr)
			}
			i += end + 1
		case c == '{':
			// Matchers without a metric name: {__name__=...} is not used here.
			return s, fmt.Errorf("a selector without a metric name in %q", expr)
		case c == '$':
			m := regexp.MustCompile(`^\$\{?[a-zA-Z0-9_]+\}?`).FindString(rest)
			if m == "" {
				return s, fmt.Errorf("stray $ in %q", expr)
			}
			i += len(m)
		case durationRE.MatchString(rest) && !numberOnly(rest):
			i += len(durationRE.FindString(rest))
		case numberRE.MatchString(rest) && rest[0] != '.' || (rest[0] == '.' && len(rest) > 1 && rest[1] >= '0' && rest[1] <= '9'):
			i += len(numberRE.FindString(rest))
		case identRE.MatchString(rest):
			word := identRE.FindString(rest)
			i += len(word)
			skipSpace()
			next := byte(0)
			if i < len(expr) {
				next = expr[i]
			}
			switch {
			case grouping[word]:
				if next != '(' {
					if word == "group_left" || word == "group_right" {
						continue // without labels
					}
					return s, fmt.Errorf("%s without a label list in %q", word, expr)
				}
				end := strings.IndexByte(expr[i:], ')')
				if end < 0 {
					return s, fmt.Errorf("unclosed %s( in %q", word, expr)
				}
				for l := range strings.SplitSeq(expr[i+1:i+end], ",") {
					if l = strings.TrimSpace(l); l != "" {
						s.grouped = append(s.grouped, l)
					}
				}
				i += end + 1
			case keywords[word], aggregations[word]:
			case next == '(':
				// a function or an aggregation
			default:
				labels := []string{}
				if next == '{' {
					end, got, err := parseMatchers(expr[i:])
					if err != nil {
						return s, fmt.Errorf("%w in %q", err, expr)
					}
					labels = got
					i += end
				}
				s.metrics[word] = append(s.metrics[word], labels...)
			}
		case strings.ContainsRune("()+-*/%^=!<>,@:", rune(c)):
			i++
		default:
			return s, fmt.Errorf("unexpected %q in %q", c, expr)
		}
	}
}

// numberOnly: rest starts with a plain number (1, 0.5, 1e3), not a
// duration like 5m.
func numberOnly(rest string) bool {
	n := numberRE.FindString(rest)
	d := durationRE.FindString(rest)
	return len(n) >= len(d)
}

// endOfString is the length of the quoted string rest starts with.
func endOfString(rest string) (int, error) {
	q := rest[0]
	for j := 1; j < len(rest); j++ {
		switch rest[j] {
		case '\\':
			if q != '`' {
				j++
			}
		case q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string")
}

// parseMatchers reads {l="v", m=~"w"} and returns its length and the
// label names.
func parseMatchers(rest string) (int, []string, error) {
	var labels []string
	j := 1
	for {
		for j < len(rest) && strings.ContainsRune(" \t\r\n,", rune(rest[j])) {
			j++
		}
		if j >= len(rest) {
			return 0, nil, fmt.Errorf("unclosed {")
		}
		if rest[j] == '}' {
			return j + 1, labels, nil
		}
		m := matcherRE.FindStringSubmatch(rest[j:])
		if m == nil {
			return 0, nil, fmt.Errorf("bad matcher at %q", rest[j:])
		}
		labels = append(labels, m[1])
		j += len(m[0])
		if j >= len(rest) || rest[j] != '"' && rest[j] != '\'' && rest[j] != '`' {
			return 0, nil, fmt.Errorf("matcher %s without a quoted value", m[1])
		}
		end, err := endOfString(rest[j:])
		if err != nil {
			return 0, nil, err
		}
		j += end
	}
}

func TestParsePromQL(t *testing.T) {
	f := func(expr string, wantMetrics map[string][]string, wantGrouped []string) {
		t.Helper()
		got, err := parsePromQL(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		for name, labels := range got.metrics {
			slices.Sort(labels)
			got.metrics[name] = slices.Compact(labels)
		}
		if fmt.Sprint(got.metrics) != fmt.Sprint(wantMetrics) || fmt.Sprint(got.grouped) != fmt.Sprint(wantGrouped) {
			t.Fatalf("%s:\n got %v %v\nwant %v %v", expr, got.metrics, got.grouped, wantMetrics, wantGrouped)
		}
	}
	f(`up`, map[string][]string{"up": {}}, nil)
	f(`sum by (pod) (m) + max without (x) (n) + sum(o) by (p)`, map[string][]string{"m": {}, "n": {}, "o": {}}, []string{"pod", "x", "p"})
	f(`sum by (verb) (rate(apiserver_request_total{job="g",code=~"5.."}[5m])) / sum(rate(apiserver_request_total[$__rate_interval]))`,
		map[string][]string{"apiserver_request_total": {"code", "job"}}, []string{"verb"})
	f(`histogram_quantile(0.99, sum by (le, verb) (rate(x_seconds_bucket{verb!~"WATCH|CONNECT"}[10m]))) > 1`,
		map[string][]string{"x_seconds_bucket": {"verb"}}, []string{"le", "verb"})
	f(`a{l="x}y"} / on (pod) group_left b > 0.8 and c offset 5m == 0 or sum(d) without (e) < 1e3`,
		map[string][]string{"a": {"l"}, "b": {}, "c": {}, "d": {}}, []string{"pod", "e"})
	f(`topk(10, max by (range) (m{namespace="$namespace"})) - time() < 14 * 86400`,
		map[string][]string{"m": {"namespace"}}, []string{"range"})
	f("increase(m[1h]) + rate(n[5m:1m])", map[string][]string{"m": {}, "n": {}}, nil)
	for _, bad := range []string{`a{l="x"`, `a{l=x}`, `sum by x`, `"open`, `{l="x"}`, `a & b`} {
		if _, err := parsePromQL(bad); err == nil {
			t.Errorf("parsed %s", bad)
		}
	}
}
