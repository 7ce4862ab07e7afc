// Package fifo is an unbounded first-in, first-out queue from any goroutines to one that
// waits: Push never blocks, so an event loop or a component's hot path may call it.
package fifo

import "sync"

// Queue is a FIFO of T; its zero value is not usable, New makes one.
type Queue[T any] struct {
	mu    sync.Mutex
	items []T
	ready chan struct{} // holds a token while items may be waiting
}

// New returns an empty queue.
func New[T any]() *Queue[T] {
	return &Queue[T]{ready: make(chan struct{}, 1)}
}

// Push appends v.
func (q *Queue[T]) Push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Pop returns the oldest item, waiting for one; false once done1 or done2 is closed (a nil
// channel never is) and nothing is queued: what was pushed before the end still comes out.
func (q *Queue[T]) Pop(done1, done2 <-chan struct{}) (T, bool) {
	for {
		if v, ok := q.take(); ok {
			return v, true
		}
		select {
		case <-q.ready:
		case <-done1:
			return q.take()
		case <-done2:
			return q.take()
		}
	}
}

// take removes the oldest item, if any.
func (q *Queue[T]) take() (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero T
	if len(q.items) == 0 {
		return zero, false
	}
	v := q.items[0]
	q.items[0] = zero // the backing array must not keep it alive
	q.items = q.items[1:]
	return v, true
}

// Ready holds a token while items may be waiting, for a loop that waits for other things too
// (a select); TakeAll then takes them.
func (q *Queue[T]) Ready() <-chan struct{} { return q.ready }

// TakeAll removes and returns every queued item, oldest first.
func (q *Queue[T]) TakeAll() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}
