// Package procstat reads a local process's CPU time and resident memory
// from /proc/<pid>/stat and /proc/<pid>/status (Linux).
package procstat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// ErrUnsupported is returned where /proc is missing.
var ErrUnsupported = errors.New("procstat: /proc not available")

// Sample is one reading of a process.
type Sample struct {
	// CPUSeconds is user plus system time since the process started.
	CPUSeconds float64
	// RSSBytes is the resident set size (VmRSS).
	RSSBytes int64
	// HWMBytes is the peak resident set size (VmHWM).
	HWMBytes int64
}

// Read samples process pid.
func Read(pid int) (Sample, error) {
	return read(fmt.Sprintf("/proc/%d", pid))
}

func read(dir string) (Sample, error) {
	var s Sample
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat("/proc/self"); serr != nil {
				return s, ErrUnsupported
			}
		}
		return s, fmt.Errorf("cannot read %s/stat: %w", dir, err)
	}
	if s.CPUSeconds, err = parseStat(stat); err != nil {
		return s, fmt.Errorf("cannot parse %s/stat: %w", dir, err)
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return s, fmt.Errorf("cannot read %s/status: %w", dir, err)
	}
	if s.RSSBytes, s.HWMBytes, err = parseStatus(status); err != nil {
		return s, fmt.Errorf("cannot parse %s/status: %w", dir, err)
	}
	return s, nil
}

// parseStat returns utime+stime in seconds. The command name (field 2) may
// hold spaces and parentheses, so fields are counted after its last ')'.
func parseStat(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want ≥ 13", len(f))
	}
	ut, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, err
	}
	st, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return float64(ut+st) / clockTicks, nil
}

// parseStatus returns VmRSS and VmHWM in bytes.
func parseStatus(b []byte) (rss, hwm int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	found := 0
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("unexpected %s line %q", k, v)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, err
		}
		if k == "VmRSS" {
			rss = n * 1024
		} else {
			hwm = n * 1024
		}
		found++
	}
	if found == 0 {
		return 0, 0, errors.New("no VmRSS (kernel thread or zombie?)")
	}
	return rss, hwm, sc.Err()
}

// Sum adds the samples of several processes (a server made of several
// local processes).
func Sum(pids []int) (Sample, error) {
	var total Sample
	for _, pid := range pids {
		s, err := Read(pid)
		if err != nil {
			return total, err
		}
		total.CPUSeconds += s.CPUSeconds
		total.RSSBytes += s.RSSBytes
		total.HWMBytes += s.HWMBytes
	}
	return total, nil
}
