package main

import (
	"flag"
	"time"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/gateway"
)

// opsFlags are kube-apiserver's audit, in-flight and TLS flags plus
// kgate's fair queuing and per-user limits, taken by `kgate gateway` and `kgate dev`.
type opsFlags struct {
	audit   gateway.AuditConfig
	limits  gateway.LimitsConfig
	tls     gateway.ServingTLSConfig
	ciphers listFlag
}

func addOpsFlags(fs *flag.FlagSet) *opsFlags {
	o := &opsFlags{}
	a, l, t := &o.audit, &o.limits, &o.tls
	fs.StringVar(&a.PolicyFile, "audit-policy-file", "", "audit.k8s.io/v1 Policy; auditing is off without it")
	fs.StringVar(&a.LogPath, "audit-log-path", "", `file audit events are written to as JSON lines ("-": standard output)`)
	fs.IntVar(&a.LogMaxSizeMB, "audit-log-maxsize", 100, "megabytes of audit log before it is rotated")
	fs.IntVar(&a.LogMaxBackups, "audit-log-maxbackup", 0, "rotated audit logs to keep (0: all)")
	fs.IntVar(&a.LogMaxAgeDays, "audit-log-maxage", 0, "days to keep rotated audit logs (0: forever)")
	fs.StringVar(&a.NATSSubject, "audit-nats-subject", "", "also publish audit events on this NATS subject (kgate.audit or below it, unless --insecure-internal)")
	fs.IntVar(&a.Buffer, "audit-buffer-size", 10000, "audit events waiting for the sinks before new ones are dropped (kgate_gateway_audit_dropped_total)")
	fs.IntVar(&l.MaxRequestsInflight, "max-requests-inflight", 400, "with --max-mutating-requests-inflight, the gateway's seats, shared by API Priority and Fairness's priority levels by their nominal concurrency shares (both 0: no seats, every request runs at once)")
	fs.IntVar(&l.MaxMutatingRequestsInflight, "max-mutating-requests-inflight", 200, "see --max-requests-inflight")
	fs.DurationVar(&l.QueueMaxWait, "fairness-max-wait", 15*time.Second, "how long a request waits in its priority level's queue for seats before 429")
	fs.Float64Var(&l.UserQPS, "user-qps", 0, "requests per second per user (token bucket; 0: unlimited); over it: 429 with Retry-After")
	fs.IntVar(&l.UserBurst, "user-burst", 0, "burst of --user-qps (default 2×QPS)")
	fs.IntVar(&l.MaxWatchesPerUser, "max-watches-per-user", 0, "concurrent watches per user (0: unlimited)")
	fs.Int64Var(&l.ListBytesPerSecond, "list-bytes-per-second", 0, "bytes per second of LIST responses per user (0: unlimited); a LIST while in debt waits up to --list-max-wait, then 429")
	fs.Int64Var(&l.ListBytesBurst, "list-bytes-burst", 0, "how far --list-bytes-per-second may run ahead (default one second's worth, at least 1 MiB)")
	fs.DurationVar(&l.ListMaxWait, "list-max-wait", time.Second, "how long a LIST waits for its user's byte budget before 429")
	fs.StringVar(&t.MinVersion, "tls-min-version", "VersionTLS12", "minimum TLS version: VersionTLS12 or VersionTLS13")
	fs.Var(&o.ciphers, "tls-cipher-suites", "TLS 1.2 cipher suites (crypto/tls names, comma-separated; default Go's)")
	fs.DurationVar(&t.ReloadInterval, "tls-reload-interval", 5*time.Second, "how often the serving certificate files are checked for a new pair")
	return o
}

// gateway sets the gateway's options; the serving pair given by
// --tls-cert-file and --tls-private-key-file is reloaded when replaced.
func (o *opsFlags) gateway(cfg *gateway.Config, certFile, keyFile string) {
	cfg.Audit, cfg.Limits, cfg.ServingTLS = o.audit, o.limits, o.tls
	cfg.ServingTLS.CipherSuites = o.ciphers
	cfg.ServingTLS.CertFile, cfg.ServingTLS.KeyFile = certFile, keyFile
}

// dev sets kgate dev's options.
func (o *opsFlags) dev(cfg *devcluster.Config) {
	cfg.Audit, cfg.Limits, cfg.ServingTLS = o.audit, o.limits, o.tls
	cfg.ServingTLS.CipherSuites = o.ciphers
}
