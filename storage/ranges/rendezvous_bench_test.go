package ranges

import (
	"fmt"
	"testing"
)

func BenchmarkOwners(b *testing.B) {
	for _, n := range []int{5, 50} {
		nodes := names("cachenode-", n)
		b.Run(fmt.Sprint(n, "nodes"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Owners("pods-2", nodes, 2)
			}
		})
	}
}
