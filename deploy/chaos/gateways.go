package chaos

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// requestTimeout bounds every request but watches: a request to a
// partitioned gateway fails after it, as a client's would.
const requestTimeout = 10 * time.Second

// gateways are clients of each gateway, by index: what a client behind a
// load balancer gets, with the gateway of every request known.
type gateways struct {
	clients, watchers []kubernetes.Interface
}

// newGateways makes clients of the gateways at addrs; config makes the
// base configuration of one address.
func newGateways(addrs []string, config func(string) (*rest.Config, error), agent string) (*gateways, error) {
	g := &gateways{}
	for _, a := range addrs {
		base, err := config(a)
		if err != nil {
			return nil, err
		}
		base.UserAgent = agent
		base.QPS, base.Burst = -1, 0
		w := rest.CopyConfig(base)
		base.Timeout = requestTimeout
		cs, err := kubernetes.NewForConfig(base)
		if err != nil {
			return nil, fmt.Errorf("cannot make a client of %s: %w", a, err)
		}
		ws, err := kubernetes.NewForConfig(w)
		if err != nil {
			return nil, fmt.Errorf("cannot make a client of %s: %w", a, err)
		}
		g.clients = append(g.clients, cs)
		g.watchers = append(g.watchers, ws)
	}
	return g, nil
}

func (g *gateways) n() int                             { return len(g.clients) }
func (g *gateways) client(i int) kubernetes.Interface  { return g.clients[i%len(g.clients)] }
func (g *gateways) watcher(i int) kubernetes.Interface { return g.watchers[i%len(g.watchers)] }

// do runs call with the client of gateway first and, while a gateway
// refuses the connection (no process listens: it is down), with the next
// ones, as a load balancer does: no byte of the request left the client.
// It returns the gateway that answered, or the last one tried.
func (g *gateways) do(first int, call func(kubernetes.Interface) error) (int, error) {
	return g.doWith(first, g.client, call)
}

// doWith is do with the clients pick gives (g.client, or g.watcher for
// requests without a timeout).
func (g *gateways) doWith(first int, pick func(int) kubernetes.Interface, call func(kubernetes.Interface) error) (int, error) {
	var err error
	for k := range g.n() {
		i := (first + k) % g.n()
		if err = call(pick(i)); !errors.Is(err, syscall.ECONNREFUSED) {
			return i, err
		}
	}
	return (first + g.n() - 1) % g.n(), err
}
