package cluster

import "github.com/prometheus/client_golang/prometheus"

// metrics of a member:
//
//	kgate_cluster_members{role}: alive members by role, as this member
//	  sees them ("unknown": unreadable metadata)
type metrics struct {
	members *prometheus.GaugeVec // nil: not registered
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return &metrics{}, nil
	}
	m := &metrics{members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kgate_cluster_members", Help: "Alive cluster members by role, as this member sees them.",
	}, []string{"role"})}
	if err := reg.Register(m.members); err != nil {
		return nil, err
	}
	return m, nil
}

// set recounts members; the caller holds the lock guarding them.
func (m *metrics) set(members map[string]Member) {
	if m.members == nil {
		return
	}
	count := map[Role]int{RoleGateway: 0, RoleCacheNode: 0, "": 0}
	for _, mb := range members {
		count[mb.Role]++
	}
	for role, n := range count {
		label := string(role)
		if label == "" {
			label = "unknown"
		}
		m.members.WithLabelValues(label).Set(float64(n))
	}
}
