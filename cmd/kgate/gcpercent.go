package main

import (
	"fmt"
	"os"
	"runtime/debug"
)

// defaultCachenodeGCPercent is a cache node's collector target. Its heap
// is mostly the objects' bytes, which the collector marks without
// scanning, so collecting four times as often as Go's default (100)
// costs little CPU and keeps the heap within a quarter of what is live
// rather than up to twice it.
const defaultCachenodeGCPercent = 25

// gcTarget returns the collector target to set from the --gc-percent
// flag, or false when GOGC is in the environment and rules.
func gcTarget(percent int, envSet bool) (int, bool, error) {
	if percent != -1 && percent <= 0 {
		return 0, false, fmt.Errorf("cannot set --gc-percent=%d: want a positive percent, or -1 for off (GOMEMLIMIT alone bounds the heap)", percent)
	}
	return percent, !envSet, nil
}

// setGCPercent applies --gc-percent unless GOGC is set.
func setGCPercent(percent int) error {
	_, envSet := os.LookupEnv("GOGC")
	p, ok, err := gcTarget(percent, envSet)
	if err != nil || !ok {
		return err
	}
	debug.SetGCPercent(p)
	return nil
}
