package fairness

import (
	"errors"
	"math/bits"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// queueSet is one pool of seats of a priority level with its queues, as
// kube-apiserver's API Priority and Fairness has them: a request takes a
// free seat, or waits in the shortest queue of the hand of queues its
// flow (the user) is dealt by shuffle sharding. A freed seat goes to the
// head of the next non-empty queue in round-robin order, so every queue
// with requests waiting gets its turn in each round however long the
// others are: a user flooding its own queues delays the others by at
// most one request per queue it holds (at most a hand) per round.
//
// Invariant (under mu): inUse < limit only when no request is queued.
type queueSet struct {
	limit    int // seats, > 0
	handSize int
	maxLen   int              // a queue this long rejects newcomers
	gauge    prometheus.Gauge // queued requests of the level
	mu       sync.Mutex       // guards everything below
	inUse    int              // seats taken
	queues   [][]*waiter      // FIFO each
	queued   int              // sum of the queues' lengths
	next     int              // the queue a freed seat looks at first
	hand     []int            // scratch for deal, sorted
}

// waiter is a queued request.
type waiter struct {
	ready  chan struct{} // closed when it is given a seat
	queue  int
	seated bool // guarded by queueSet.mu
}

var errQueueFull = errors.New("queue full")

func newQueueSet(limit, queues, handSize, maxLen int, gauge prometheus.Gauge) *queueSet {
	return &queueSet{
		limit: limit, handSize: handSize, maxLen: maxLen, gauge: gauge,
		queues: make([][]*waiter, queues), hand: make([]int, 0, handSize),
	}
}

// dealable reports whether a 64-bit hash is enough to deal every hand of
// handSize of queues queues: queues × (queues-1) × ... must fit in it.
func dealable(queues, handSize int) bool {
	if handSize < 1 || handSize > queues {
		return false
	}
	p := uint64(1)
	for i := range handSize {
		hi, lo := bits.Mul64(p, uint64(queues-i))
		if hi != 0 {
			return false
		}
		p = lo
	}
	return true
}

// enter takes a free seat (nil waiter) or queues a waiter for flow; it
// fails with errQueueFull when the shortest queue of flow's hand is full.
func (s *queueSet) enter(flow string) (*waiter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inUse < s.limit {
		s.inUse++
		return nil, nil
	}
	q := s.shortest(flow)
	if len(s.queues[q]) >= s.maxLen {
		return nil, errQueueFull
	}
	w := &waiter{ready: make(chan struct{}), queue: q}
	s.queues[q] = append(s.queues[q], w)
	s.queued++
	s.gauge.Inc()
	return w, nil
}

// leave takes back a waiter that gave up; it reports whether the waiter
// had been given a seat meanwhile (the seat is then the caller's).
func (s *queueSet) leave(w *waiter) (seated bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.seated {
		return true
	}
	q := s.queues[w.queue]
	for i, x := range q {
		if x == w {
			s.queues[w.queue] = append(q[:i], q[i+1:]...)
			q[len(q)-1] = nil
			break
		}
	}
	s.queued--
	s.gauge.Dec()
	return false
}

// release frees a seat and gives it to the next waiter in round-robin
// order over the non-empty queues.
func (s *queueSet) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inUse--
	for s.inUse < s.limit && s.queued > 0 {
		for len(s.queues[s.next]) == 0 {
			s.next = (s.next + 1) % len(s.queues)
		}
		q := s.queues[s.next]
		w := q[0]
		q[0] = nil
		s.queues[s.next] = q[1:]
		s.next = (s.next + 1) % len(s.queues)
		s.queued--
		s.gauge.Dec()
		s.inUse++
		w.seated = true
		close(w.ready)
	}
}

// shortest is the shortest queue of flow's hand (the first dealt of
// equals); s.mu is held.
func (s *queueSet) shortest(flow string) int {
	best := -1
	s.deal(flowHash(flow), func(q int) {
		if best < 0 || len(s.queues[q]) < len(s.queues[best]) {
			best = q
		}
	})
	return best
}

// deal picks handSize distinct queues from hash h, each a digit of h in
// the mixed radix len(queues), len(queues)-1, ...: the i-th digit chooses
// among the queues not dealt yet. s.mu is held (s.hand is scratch).
func (s *queueSet) deal(h uint64, pick func(q int)) {
	hand := s.hand[:0]
	for i := range s.handSize {
		n := uint64(len(s.queues) - i)
		q := int(h % n)
		h /= n
		// The q-th queue not dealt yet: step over the dealt ones (sorted)
		// at or below it.
		j := 0
		for ; j < len(hand) && hand[j] <= q; j++ {
			q++
		}
		hand = append(hand, 0)
		copy(hand[j+1:], hand[j:])
		hand[j] = q
		pick(q)
	}
}

// flowHash is FNV-1a of flow with a final avalanche (splitmix64's), so
// every digit deal takes from it depends on the whole name: the same user
// always gets the same hand, in every gateway.
func flowHash(flow string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(flow); i++ {
		h ^= uint64(flow[i])
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
