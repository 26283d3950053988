// Package audit writes kube-apiserver's audit.k8s.io/v1 events: a policy
// file (evaluated by k8s.io/apiserver/pkg/audit/policy, the same rules
// kube-apiserver applies) picks each request's level and omitted stages;
// events are encoded as JSON lines on the request's goroutine and handed
// to one writer goroutine through a bounded buffer, so a slow sink drops
// events (counted) instead of holding requests back. The sinks are a
// rotated log file (lumberjack, as kube-apiserver's --audit-log-*
// options) and, optionally, a NATS subject.
package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/natefinch/lumberjack.v2"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	kaudit "k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Config configures an Auditor.
type Config struct {
	// PolicyFile is an audit.k8s.io Policy (--audit-policy-file).
	// Required.
	PolicyFile string
	// Path is the log file (--audit-log-path); "-" is standard output.
	// Without it (and without a NATS subject) events are only counted.
	Path string
	// MaxSizeMB, MaxBackups and MaxAgeDays rotate the file
	// (--audit-log-maxsize, -maxbackup, -maxage); 0 keeps lumberjack's
	// defaults (100 MB, every backup, forever).
	MaxSizeMB, MaxBackups, MaxAgeDays int
	// NATS and Subject also publish each event (--audit-nats-subject).
	NATS    *nats.Conn
	Subject string
	// Buffer is how many encoded events wait for the writer before new
	// ones are dropped. Default 10000.
	Buffer int
	Logger *slog.Logger
	// Metrics registers kgate_gateway_audit_events_total and
	// kgate_gateway_audit_dropped_total; required.
	Metrics prometheus.Registerer
}

// Auditor evaluates the policy and writes events.
type Auditor struct {
	cfg       Config
	evaluator kaudit.PolicyRuleEvaluator
	out       io.WriteCloser // nil: no file
	events    prometheus.Counter
	dropped   prometheus.Counter

	mu     sync.RWMutex // guards closed and sending on queue
	closed bool
	queue  chan []byte
	done   chan struct{} // closed when the writer has finished
}

// New loads the policy and opens the sinks; Run writes.
func New(cfg Config) (*Auditor, error) {
	if cfg.PolicyFile == "" || cfg.Logger == nil || cfg.Metrics == nil {
		return nil, errors.New("cannot make auditor: PolicyFile, Logger and Metrics are required")
	}
	if (cfg.Subject == "") != (cfg.NATS == nil) {
		return nil, errors.New("cannot make auditor: a NATS subject needs a NATS connection")
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 10000
	}
	p, err := policy.LoadPolicyFromFile(cfg.PolicyFile)
	if err != nil {
		return nil, fmt.Errorf("cannot load audit policy: %w", err)
	}
	a := &Auditor{
		cfg: cfg, evaluator: policy.NewPolicyRuleEvaluator(p),
		queue: make(chan []byte, cfg.Buffer), done: make(chan struct{}),
		events:  prometheus.NewCounter(prometheus.CounterOpts{Name: "kgate_gateway_audit_events_total", Help: "Audit events written."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "kgate_gateway_audit_dropped_total", Help: "Audit events dropped because the sinks fell behind."}),
	}
	for _, c := range []prometheus.Collector{a.events, a.dropped} {
		if err := cfg.Metrics.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register audit metrics: %w", err)
		}
	}
	switch cfg.Path {
	case "":
	case "-":
		a.out = nopCloser{os.Stdout}
	default:
		a.out = &lumberjack.Logger{Filename: cfg.Path, MaxSize: cfg.MaxSizeMB, MaxBackups: cfg.MaxBackups, MaxAge: cfg.MaxAgeDays}
	}
	return a, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Decision is what the policy says about one request.
type Decision struct {
	Level      auditv1.Level
	omitStages []auditinternal.Stage
}

// Logs reports whether stage is written at all.
func (d Decision) Logs(stage auditv1.Stage) bool {
	return d.Level != auditv1.LevelNone && !slices.Contains(d.omitStages, auditinternal.Stage(stage))
}

// Request reports whether request bodies are recorded; Response whether
// response bodies are.
func (d Decision) Request() bool {
	return d.Level == auditv1.LevelRequest || d.Level == auditv1.LevelRequestResponse
}
func (d Decision) Response() bool { return d.Level == auditv1.LevelRequestResponse }

// Evaluate applies the policy to a request's attributes.
func (a *Auditor) Evaluate(attrs authorizer.Attributes) Decision {
	c := a.evaluator.EvaluatePolicyRule(attrs)
	return Decision{Level: auditv1.Level(c.Level), omitStages: c.OmitStages}
}

// Emit encodes ev and queues it; it never blocks. A full buffer or a
// closed auditor drops the event.
func (a *Auditor) Emit(ev *auditv1.Event) {
	ev.Kind, ev.APIVersion = "Event", auditv1.SchemeGroupVersion.String()
	b, err := json.Marshal(ev)
	if err != nil {
		a.cfg.Logger.Error("cannot encode audit event", "err", err)
		a.dropped.Inc()
		return
	}
	b = append(b, '\n')
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		a.dropped.Inc()
		return
	}
	select {
	case a.queue <- b:
	default:
		a.dropped.Inc()
	}
}

// Run writes queued events until Close; it returns once the queue is
// drained.
func (a *Auditor) Run() {
	defer close(a.done)
	for b := range a.queue {
		if a.out != nil {
			if _, err := a.out.Write(b); err != nil {
				a.cfg.Logger.Warn("cannot write audit event", "err", err)
				a.dropped.Inc()
				continue
			}
		}
		if a.cfg.NATS != nil {
			if err := a.cfg.NATS.Publish(a.cfg.Subject, b[:len(b)-1]); err != nil {
				a.cfg.Logger.Warn("cannot publish audit event", "err", err)
			}
		}
		a.events.Inc()
	}
}

// Close stops accepting events, waits for Run to write what is queued
// (when Run was started) and closes the file.
func (a *Auditor) Close(started bool) error {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.queue)
	}
	a.mu.Unlock()
	if started {
		<-a.done
	}
	if a.out != nil {
		return a.out.Close()
	}
	return nil
}
