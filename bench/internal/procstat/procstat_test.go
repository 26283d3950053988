package procstat

import (
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	stat := []byte("4242 (kgate (dev) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 130 0 0 20 0 12 0 99 2000000 3000 18446744073709551615\n")
	cpu, err := parseStat(stat)
	if err != nil || cpu != 3.8 {
		t.Fatalf("parseStat = %v, %v; want 3.8", cpu, err)
	}
	status := []byte("Name:\tkgate\nVmPeak:\t  900 kB\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t12\n")
	rss, hwm, err := parseStatus(status)
	if err != nil || rss != 1024*1024 || hwm != 2048*1024 {
		t.Fatalf("parseStatus = %d, %d, %v", rss, hwm, err)
	}
	if _, err := parseStat([]byte("garbage")); err == nil {
		t.Fatal("parseStat accepted garbage")
	}
	if _, _, err := parseStatus([]byte("Name:\tkthreadd\n")); err == nil {
		t.Fatal("parseStatus accepted a status without VmRSS")
	}
}

func TestReadSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	s, err := Sum([]int{os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	if s.RSSBytes <= 0 || s.CPUSeconds < 0 || s.HWMBytes < s.RSSBytes {
		t.Fatalf("implausible sample of this process: %+v", s)
	}
	if _, err := Read(-1); err == nil {
		t.Fatal("Read(-1) succeeded")
	}
}
