package reflector

import "time"

// SetAfterList installs a hook run between the list and the watch.
func (r *Reflector) SetAfterList(f func(rev int64)) { r.afterList = f }

// LoseForTest removes key from the store behind the watch's back, as a
// lost event would.
func (r *Reflector) LoseForTest(key string) { r.state.Load().store.Delete(key, 0) }

// SetConsistencyInterval sets how often the checker runs.
func (r *Reflector) SetConsistencyInterval(d time.Duration) { r.cfg.ConsistencyInterval = d }

// SetStallAfter sets the stall timeout; call before Run.
func (r *Reflector) SetStallAfter(d time.Duration) { r.cfg.StallAfter = d }
