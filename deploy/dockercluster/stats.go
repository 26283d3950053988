package dockercluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MemoryUsage is each running container's memory use (its cgroup's, as
// docker stats reports it: what the kernel would count against a limit),
// by container name.
func (c *Cluster) MemoryUsage(ctx context.Context) (map[string]int64, error) {
	out, err := c.d.run(ctx, append([]string{"stats", "--no-stream", "--format", "{{.Name}}\t{{.MemUsage}}"}, c.containers()...)...)
	if err != nil {
		return nil, fmt.Errorf("cannot read container stats: %w", err)
	}
	return parseMemUsage(out)
}

// parseMemUsage reads docker stats lines "name\t12.5MiB / 23.4GiB".
func parseMemUsage(out string) (map[string]int64, error) {
	m := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		name, usage, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("cannot read container stats line %q", line)
		}
		used, _, _ := strings.Cut(usage, "/")
		q, err := resource.ParseQuantity(strings.TrimSuffix(strings.TrimSpace(strings.ReplaceAll(used, "B", "")), "i") + suffixI(used))
		if err != nil {
			return nil, fmt.Errorf("cannot read memory use %q of %s: %w", used, name, err)
		}
		m[name] = q.Value()
	}
	return m, nil
}

// suffixI keeps the binary 'i' of "MiB" once the 'B' is gone: "12.5MiB"
// becomes "12.5Mi".
func suffixI(used string) string {
	if strings.Contains(used, "iB") {
		return "i"
	}
	return ""
}

// CacheNodeMetrics is cache node i's /metrics, in Prometheus text.
func (c *Cluster) CacheNodeMetrics(ctx context.Context, i int) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.HostAddr(CacheNode, i)+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("cannot read the metrics of %s: %w", c.name(CacheNode, i), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("cannot read the metrics of %s: %s: %w", c.name(CacheNode, i), resp.Status, err)
	}
	return string(b), nil
}
