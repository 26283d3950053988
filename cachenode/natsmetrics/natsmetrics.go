// Package natsmetrics watches a member's NATS connection: it exports the
// connection's state and traffic as Prometheus metrics, and counts and
// logs its disconnections, reconnections and asynchronous errors (a slow
// consumer above all: a subscription whose buffer overflowed, so NATS
// dropped messages the member then has to repair from a window).
//
// Make a Conn before connecting, pass its Options to nats.Connect, then
// Attach the connection: the handlers must be set at connect time, the
// traffic is read from the connection at each scrape.
package natsmetrics

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// Conn is the metrics of one NATS connection.
type Conn struct {
	log *slog.Logger
	nc  atomic.Pointer[nats.Conn]

	disconnects, slowConsumers, errs prometheus.Counter

	connected, reconnects, inMsgs, outMsgs, inBytes, outBytes, buffered *prometheus.Desc
}

// New makes the metrics and registers them on reg; log receives the
// connection's notices.
func New(reg prometheus.Registerer, log *slog.Logger) (*Conn, error) {
	if reg == nil || log == nil {
		return nil, errors.New("cannot make NATS metrics: a registerer and a logger are required")
	}
	c := &Conn{
		log: log,
		disconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_nats_disconnects_total", Help: "Times the NATS connection was lost.",
		}),
		slowConsumers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_nats_slow_consumers_total", Help: "Times a NATS subscription fell behind and the client dropped its messages (each gap is repaired from a cache node's window).",
		}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kgate_nats_errors_total", Help: "Asynchronous NATS errors other than slow consumers (permission violations, protocol errors).",
		}),
		connected:  prometheus.NewDesc("kgate_nats_connected", "1 while the NATS connection is up, 0 while it is down or reconnecting.", nil, nil),
		reconnects: prometheus.NewDesc("kgate_nats_reconnects_total", "Times the NATS connection was re-established.", nil, nil),
		inMsgs:     prometheus.NewDesc("kgate_nats_received_messages_total", "Messages received from NATS.", nil, nil),
		outMsgs:    prometheus.NewDesc("kgate_nats_sent_messages_total", "Messages sent to NATS.", nil, nil),
		inBytes:    prometheus.NewDesc("kgate_nats_received_bytes_total", "Payload bytes received from NATS.", nil, nil),
		outBytes:   prometheus.NewDesc("kgate_nats_sent_bytes_total", "Payload bytes sent to NATS.", nil, nil),
		buffered:   prometheus.NewDesc("kgate_nats_buffered_bytes", "Bytes written but not yet flushed to the server (held in the reconnect buffer while disconnected).", nil, nil),
	}
	for _, col := range []prometheus.Collector{c.disconnects, c.slowConsumers, c.errs, c} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Options are the connection handlers that count and log; pass them to
// nats.Connect.
func (c *Conn) Options() []nats.Option {
	return []nats.Option{
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.disconnects.Inc()
			c.log.Warn("NATS connection lost", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.log.Info("NATS connection re-established", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			if errors.Is(err, nats.ErrSlowConsumer) {
				c.slowConsumers.Inc()
				c.log.Warn("NATS slow consumer: messages dropped", "subject", subject)
				return
			}
			c.errs.Inc()
			c.log.Warn("NATS error", "subject", subject, "err", err)
		}),
	}
}

// Attach makes nc the connection whose state and traffic are exported.
func (c *Conn) Attach(nc *nats.Conn) { c.nc.Store(nc) }

// Describe implements prometheus.Collector.
func (c *Conn) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connected, c.reconnects, c.inMsgs, c.outMsgs, c.inBytes, c.outBytes, c.buffered} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: nothing before Attach.
func (c *Conn) Collect(ch chan<- prometheus.Metric) {
	nc := c.nc.Load()
	if nc == nil {
		return
	}
	up := 0.0
	if nc.IsConnected() {
		up = 1
	}
	s := nc.Stats()
	ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(c.reconnects, prometheus.CounterValue, float64(s.Reconnects))
	ch <- prometheus.MustNewConstMetric(c.inMsgs, prometheus.CounterValue, float64(s.InMsgs))
	ch <- prometheus.MustNewConstMetric(c.outMsgs, prometheus.CounterValue, float64(s.OutMsgs))
	ch <- prometheus.MustNewConstMetric(c.inBytes, prometheus.CounterValue, float64(s.InBytes))
	ch <- prometheus.MustNewConstMetric(c.outBytes, prometheus.CounterValue, float64(s.OutBytes))
	if n, err := nc.Buffered(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.buffered, prometheus.GaugeValue, float64(n))
	}
}
