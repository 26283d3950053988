package cluster

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// Timing sets how fast members gossip, probe each other and declare a
// silent member dead. Zero fields take the value of LAN().
type Timing struct {
	// ProbeInterval: each member probes one other member this often;
	// ProbeTimeout bounds the wait for its ack before indirect probes.
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	// SuspicionMult scales the time a suspect member has to refute the
	// suspicion (SuspicionMult × log10(members) × ProbeInterval) before it
	// is declared dead; SuspicionMaxTimeoutMult bounds how far that is
	// stretched while confirmations are missing.
	SuspicionMult           int
	SuspicionMaxTimeoutMult int
	// GossipInterval: piggybacked state is sent to a few members this
	// often. PushPullInterval: a full state sync with one member.
	GossipInterval   time.Duration
	PushPullInterval time.Duration
	// GossipToTheDead: how long dead members still receive gossip (and
	// are remembered).
	GossipToTheDead time.Duration
	// DeadNodeReclaim: a member declared dead may come back under the
	// same name from another address after this long (a restarted pod
	// keeps its name and gets a new IP).
	DeadNodeReclaim time.Duration
	// TCPTimeout bounds a join's or push/pull's TCP exchange.
	TCPTimeout time.Duration
	// JoinRetry is the first wait between join attempts, doubled up to
	// JoinRetryMax. JoinRetryMax is also how often a member alone in its
	// cluster tries to join again (a healed partition, a restarted seed).
	JoinRetry    time.Duration
	JoinRetryMax time.Duration
}

// LAN is memberlist's LAN profile: a dead member is declared after ~5–25 s,
// bandwidth is low.
func LAN() Timing {
	d := memberlist.DefaultLANConfig()
	return Timing{
		ProbeInterval:           d.ProbeInterval,           // 1s
		ProbeTimeout:            d.ProbeTimeout,            // 500ms
		SuspicionMult:           d.SuspicionMult,           // 4
		SuspicionMaxTimeoutMult: d.SuspicionMaxTimeoutMult, // 6
		GossipInterval:          d.GossipInterval,          // 200ms
		PushPullInterval:        d.PushPullInterval,        // 30s
		GossipToTheDead:         d.GossipToTheDeadTime,     // 30s
		DeadNodeReclaim:         10 * time.Second,
		TCPTimeout:              d.TCPTimeout, // 10s
		JoinRetry:               500 * time.Millisecond,
		JoinRetryMax:            30 * time.Second,
	}
}

// Fast is for tests and single-host clusters: a member that stops
// answering is declared dead within ~1–2 s.
func Fast() Timing {
	return Timing{
		ProbeInterval:           200 * time.Millisecond,
		ProbeTimeout:            100 * time.Millisecond,
		SuspicionMult:           2,
		SuspicionMaxTimeoutMult: 2,
		GossipInterval:          50 * time.Millisecond,
		PushPullInterval:        2 * time.Second,
		GossipToTheDead:         2 * time.Second,
		DeadNodeReclaim:         500 * time.Millisecond,
		TCPTimeout:              time.Second,
		JoinRetry:               100 * time.Millisecond,
		JoinRetryMax:            time.Second,
	}
}

// withDefaults fills zero fields from LAN().
func (t Timing) withDefaults() Timing {
	d := LAN()
	fill := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&t.ProbeInterval, d.ProbeInterval)
	fill(&t.ProbeTimeout, d.ProbeTimeout)
	fill(&t.GossipInterval, d.GossipInterval)
	fill(&t.PushPullInterval, d.PushPullInterval)
	fill(&t.GossipToTheDead, d.GossipToTheDead)
	fill(&t.DeadNodeReclaim, d.DeadNodeReclaim)
	fill(&t.TCPTimeout, d.TCPTimeout)
	fill(&t.JoinRetry, d.JoinRetry)
	fill(&t.JoinRetryMax, d.JoinRetryMax)
	if t.SuspicionMult == 0 {
		t.SuspicionMult = d.SuspicionMult
	}
	if t.SuspicionMaxTimeoutMult == 0 {
		t.SuspicionMaxTimeoutMult = d.SuspicionMaxTimeoutMult
	}
	return t
}

// valid reports whether no field is negative.
func (t Timing) valid() bool {
	for _, d := range []time.Duration{t.ProbeInterval, t.ProbeTimeout, t.GossipInterval, t.PushPullInterval,
		t.GossipToTheDead, t.DeadNodeReclaim, t.TCPTimeout, t.JoinRetry, t.JoinRetryMax} {
		if d < 0 {
			return false
		}
	}
	return t.SuspicionMult >= 0 && t.SuspicionMaxTimeoutMult >= 0
}

// apply sets t on a memberlist configuration.
func (t Timing) apply(c *memberlist.Config) {
	c.ProbeInterval = t.ProbeInterval
	c.ProbeTimeout = t.ProbeTimeout
	c.SuspicionMult = t.SuspicionMult
	c.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	c.GossipInterval = t.GossipInterval
	c.PushPullInterval = t.PushPullInterval
	c.GossipToTheDeadTime = t.GossipToTheDead
	c.DeadNodeReclaimTime = t.DeadNodeReclaim
	c.TCPTimeout = t.TCPTimeout
}
