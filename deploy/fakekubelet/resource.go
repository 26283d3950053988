package fakekubelet

import (
	"cmp"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Usage is what the node and its containers use, as the kubelet's
// /metrics/resource reports it (what metrics-server scrapes).
type Usage struct {
	// NodeCPU is the node's CPU use in cores; NodeMemory its working set
	// in bytes.
	NodeCPU    float64
	NodeMemory uint64
	Containers []ContainerUsage
}

// ContainerUsage is what one container uses.
type ContainerUsage struct {
	Namespace, Pod, Container string
	// CPU is in cores; Memory is the working set in bytes.
	CPU    float64
	Memory uint64
}

// SetUsage sets what the node and its containers use from now on. A
// container not configured before starts now; one left out has stopped.
func (k *Kubelet) SetUsage(u Usage) { k.meter.set(u) }

// meter turns the configured usage into the kubelet's resource metrics:
// CPU as a counter of core-seconds that grows at the configured rate
// from when the node or container started, memory as configured.
type meter struct {
	now func() time.Time // read under mu: scrapes and changes are in time order

	mu         sync.Mutex // guards node, nodeMemory and containers
	node       cpuCounter
	nodeMemory uint64
	containers map[containerKey]*containerMeter
}

type containerKey struct{ namespace, pod, container string }

type containerMeter struct {
	cpu    cpuCounter
	memory uint64
}

// cpuCounter is cumulative CPU time: zero at start, then growing by
// cores each second; base is its value when cores last changed, at since.
type cpuCounter struct {
	start, since time.Time
	base, cores  float64
}

func newCPUCounter(t time.Time, cores float64) cpuCounter {
	return cpuCounter{start: t, since: t, cores: cores}
}

// at is the counter's value at t, in core-seconds.
func (c *cpuCounter) at(t time.Time) float64 { return c.base + c.cores*t.Sub(c.since).Seconds() }

func (c *cpuCounter) setCores(t time.Time, cores float64) {
	c.base, c.since, c.cores = c.at(t), t, cores
}

// newMeter starts the node's counter now() with no use configured.
func newMeter(now func() time.Time) *meter {
	return &meter{now: now, node: newCPUCounter(milli(now()), 0), containers: map[containerKey]*containerMeter{}}
}

// milli truncates t to the millisecond, the precision of the timestamps
// the metrics carry: the counters are computed at the time printed, so
// the rate between two scrapes is exactly the configured one.
func milli(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }

func (m *meter) set(u Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := milli(m.now())
	m.node.setCores(t, u.NodeCPU)
	m.nodeMemory = u.NodeMemory
	running := make(map[containerKey]*containerMeter, len(u.Containers))
	for _, c := range u.Containers {
		key := containerKey{c.Namespace, c.Pod, c.Container}
		cm, ok := m.containers[key]
		if ok {
			cm.cpu.setCores(t, c.CPU)
		} else {
			cm = &containerMeter{cpu: newCPUCounter(t, c.CPU)}
		}
		cm.memory = c.Memory
		running[key] = cm
	}
	m.containers = running
}

// writeTo writes the metrics now in the Prometheus text format, as the
// kubelet's /metrics/resource does: the families in name order, each
// sample with the time as its timestamp in milliseconds.
func (m *meter) writeTo(w io.Writer) error {
	m.mu.Lock()
	t := milli(m.now())
	keys := make([]containerKey, 0, len(m.containers))
	for key := range m.containers {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b containerKey) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.pod, b.pod), cmp.Compare(a.container, b.container))
	})
	type sample struct {
		labels string
		value  float64
	}
	var cpu, mem, start, podCPU, podMem []sample
	for i, key := range keys {
		c := m.containers[key]
		labels := `{container="` + key.container + `",namespace="` + key.namespace + `",pod="` + key.pod + `"}`
		cpu = append(cpu, sample{labels, c.cpu.at(t)})
		mem = append(mem, sample{labels, float64(c.memory)})
		start = append(start, sample{labels, float64(c.cpu.start.UnixMilli()) / 1e3})
		// A pod's use is its containers' (keys are sorted by pod).
		if i == 0 || keys[i-1].namespace != key.namespace || keys[i-1].pod != key.pod {
			labels := `{namespace="` + key.namespace + `",pod="` + key.pod + `"}`
			podCPU, podMem = append(podCPU, sample{labels, 0}), append(podMem, sample{labels, 0})
		}
		podCPU[len(podCPU)-1].value += cpu[i].value
		podMem[len(podMem)-1].value += mem[i].value
	}
	nodeCPU, nodeMem := m.node.at(t), float64(m.nodeMemory)
	m.mu.Unlock()

	ts := " " + strconv.FormatInt(t.UnixMilli(), 10) + "\n"
	var b []byte
	family := func(name, typ, help string, samples ...sample) {
		if len(samples) == 0 {
			return // as the kubelet's registry, which writes no empty family
		}
		b = append(b, "# HELP "+name+" [STABLE] "+help+"\n# TYPE "+name+" "+typ+"\n"...)
		for _, s := range samples {
			b = append(b, name+s.labels+" "...)
			b = strconv.AppendFloat(b, s.value, 'g', -1, 64)
			b = append(b, ts...)
		}
	}
	family("container_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the container in core-seconds", cpu...)
	family("container_memory_working_set_bytes", "gauge", "Current working set of the container in bytes", mem...)
	family("container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds", start...)
	family("node_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the node in core-seconds", sample{"", nodeCPU})
	family("node_memory_working_set_bytes", "gauge", "Current working set of the node in bytes", sample{"", nodeMem})
	family("pod_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the pod in core-seconds", podCPU...)
	family("pod_memory_working_set_bytes", "gauge", "Current working set of the pod in bytes", podMem...)
	b = append(b, "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise\n"+
		"# TYPE resource_scrape_error gauge\nresource_scrape_error 0\n"...)
	_, err := w.Write(b)
	return err
}

func (k *Kubelet) serveResourceMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_ = k.meter.writeTo(w)
}
