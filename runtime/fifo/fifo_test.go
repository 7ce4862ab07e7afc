package fifo

import (
	"sync"
	"testing"
	"time"
)

// Items from several pushers come out once each and, per pusher, in order; Pop waits for them.
func TestOrderAcrossGoroutines(t *testing.T) {
	q := New[[2]int]()
	const pushers, each = 4, 1000
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				q.Push([2]int{p, i})
			}
		}()
	}
	next := make([]int, pushers)
	for range pushers * each {
		v, ok := q.Pop(nil, nil)
		if !ok {
			t.Fatal("Pop ended without a done channel")
		}
		if v[1] != next[v[0]] {
			t.Fatalf("pusher %d: item %d after %d", v[0], v[1], next[v[0]]-1)
		}
		next[v[0]]++
	}
	wg.Wait()
}

// After the end, what was queued still comes out, then Pop reports the end at once; before
// it, Pop waits.
func TestEnd(t *testing.T) {
	q := New[int]()
	done := make(chan struct{})
	got := make(chan int)
	go func() {
		v, _ := q.Pop(nil, done)
		got <- v
	}()
	select {
	case v := <-got:
		t.Fatalf("Pop returned %d from an empty queue", v)
	case <-time.After(20 * time.Millisecond):
	}
	q.Push(7)
	if v := <-got; v != 7 {
		t.Fatalf("got %d, want 7", v)
	}
	q.Push(1)
	q.Push(2)
	close(done)
	for _, want := range []int{1, 2} {
		if v, ok := q.Pop(done, nil); !ok || v != want {
			t.Fatalf("after the end: %d, %v; want %d, true", v, ok, want)
		}
	}
	if _, ok := q.Pop(nil, done); ok {
		t.Fatal("Pop on an empty, ended queue reported an item")
	}
}

// Ready signals once items are pushed; TakeAll returns them all, in order, and empties the queue.
func TestReadyTakeAll(t *testing.T) {
	q := New[int]()
	select {
	case <-q.Ready():
		t.Fatal("ready while empty")
	default:
	}
	q.Push(1)
	q.Push(2)
	<-q.Ready()
	if got := q.TakeAll(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("TakeAll: %v", got)
	}
	if got := q.TakeAll(); len(got) != 0 {
		t.Fatalf("TakeAll after TakeAll: %v", got)
	}
}
