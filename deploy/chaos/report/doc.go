// Package report renders a chaos run: what a run of deploy/chaos measured
// and checked (a Run) becomes a directory a person can read without the
// raw data.
//
// Write produces three files:
//
//   - summary.md: the seed and cluster, when the run started and ended, a
//     PASS or FAIL verdict, one table row per fault window (its offset,
//     duration, heal time, requests and failures, and the counts of every
//     watch, write and read check) plus a whole-run row, and every problem
//     found;
//   - throughput.png: successful and failed requests per second and the
//     error rate over time, with the fault windows shaded;
//   - lag.png: the per-second p99 watch delivery lag of each gateway over
//     time, with the same shading.
//
// The output depends only on the Run: the same Run renders byte for byte
// the same files.
package report
