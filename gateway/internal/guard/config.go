package guard

import "time"

// Config are the settings of audit, fairness and serving TLS.
type Config struct {
	// Audit writes audit.k8s.io/v1 events; off without a policy file.
	Audit AuditConfig
	// Limits are the in-flight, per-user rate, watch and list-bytes
	// limits; zero values disable each.
	Limits LimitsConfig
	// ServingTLS reloads the serving certificate from files and sets the
	// TLS version and cipher suites.
	ServingTLS ServingTLSConfig
	// RequestHeaderClientCAFile, the front proxies' CAs, is added to the
	// client CAs the TLS handshake advertises, when it advertises some.
	RequestHeaderClientCAFile string
}

// AuditConfig are kube-apiserver's --audit-* options.
type AuditConfig struct {
	// PolicyFile (--audit-policy-file) turns auditing on.
	PolicyFile string
	// LogPath (--audit-log-path) is the JSON-lines file; "-" is stdout.
	LogPath string
	// LogMaxSizeMB, LogMaxBackups, LogMaxAgeDays rotate it.
	LogMaxSizeMB, LogMaxBackups, LogMaxAgeDays int
	// NATSSubject also publishes each event on Deps.NATS.
	NATSSubject string
	// Buffer bounds the events waiting for the sinks (default 10000);
	// past it events are dropped and counted.
	Buffer int
}

// LimitsConfig are the seats of API Priority and Fairness and kgate's
// per-user limits (see fairness.Config); zero disables each per-user
// limit.
type LimitsConfig struct {
	// MaxRequestsInflight and MaxMutatingRequestsInflight together are
	// the gateway's seats, shared by the priority levels by their
	// nominal concurrency shares, as kube-apiserver's with API Priority
	// and Fairness; watches hold seats only while they start, other
	// long-running requests none. Both zero: no API Priority and
	// Fairness (every request runs at once).
	MaxRequestsInflight         int
	MaxMutatingRequestsInflight int
	// QueueMaxWait bounds a request's wait in its priority level's queue
	// (default 15s, kube-apiserver's quarter of its 60 s request
	// timeout); past it: 429.
	QueueMaxWait time.Duration
	// UserQPS and UserBurst: each user's token bucket.
	UserQPS   float64
	UserBurst int
	// MaxWatchesPerUser caps each user's concurrent watches.
	MaxWatchesPerUser int
	// ListBytesPerSecond is each user's budget of bytes returned by LISTs;
	// ListBytesBurst how far it may run ahead; ListMaxWait how long a
	// LIST waits for a budget in debt before 429.
	ListBytesPerSecond int64
	ListBytesBurst     int64
	ListMaxWait        time.Duration
}

// ServingTLSConfig refines Deps.TLS.
type ServingTLSConfig struct {
	// CertFile and KeyFile, when set, are loaded and watched: a replaced
	// pair is served to new connections without a restart.
	CertFile, KeyFile string
	// ReloadInterval is how often the files are checked (default 5s).
	ReloadInterval time.Duration
	// MinVersion is VersionTLS12 (the default and the floor) or
	// VersionTLS13 (--tls-min-version).
	MinVersion string
	// CipherSuites are crypto/tls names of the TLS 1.2 suites to offer
	// (--tls-cipher-suites); default Go's.
	CipherSuites []string
}
