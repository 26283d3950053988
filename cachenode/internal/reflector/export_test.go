package reflector

// SetAfterList installs a hook run between the list and the watch.
func (r *Reflector) SetAfterList(f func(rev int64)) { r.afterList = f }
