package packetstream

import (
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nicstack/nicstack/netdev"
)

// Queue against a model of the stream: the frames published and not taken, their bytes exact
// when the sink's tail stands at a batch's edge and between the bounds of the batch it stands
// in otherwise, a sojourn only while something waits, and the acknowledgements not collected.
func TestQueueModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := 1 << rapid.IntRange(1, 5).Draw(t, "queue")
		src, snk, err := NewHeapStream(Config{QueueSize: size, BulkSize: 4 * size * BlockSize})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		defer snk.Close()
		var sizes []int // of every frame submitted, in order
		var edges []int // frames submitted after each Wakeup that published some
		pending := 0    // submitted since the last Wakeup
		taken, acked := 0, 0
		var got []Packet // taken, not yet acknowledged
		t.Repeat(map[string]func(*rapid.T){
			"submit": func(t *rapid.T) {
				n := rapid.IntRange(1, size).Draw(t, "frames")
				for range n {
					if !src.CanSubmit() {
						break
					}
					p, err := src.Alloc(rapid.IntRange(1, 2*BlockSize).Draw(t, "size"))
					if err != nil {
						break
					}
					src.TrySubmit(p)
					sizes = append(sizes, int(p.Size))
					pending++
				}
			},
			"wakeup": func(t *rapid.T) {
				src.Wakeup()
				if pending > 0 {
					edges = append(edges, len(sizes))
					pending = 0
				}
			},
			"take": func(t *rapid.T) {
				n := rapid.IntRange(1, size).Draw(t, "frames")
				for range n {
					p, ok := snk.TryGet()
					if !ok {
						break
					}
					got = append(got, p)
					taken++
				}
				snk.Wakeup()
			},
			"ack": func(t *rapid.T) {
				for len(got) > 0 && snk.TryAck(got[0]) {
					got = got[1:]
					acked++
				}
				snk.Wakeup()
			},
			"release": func(t *rapid.T) {
				acked -= src.ReleaseAcked()
				src.Wakeup()
				if pending > 0 {
					edges = append(edges, len(sizes))
					pending = 0
				}
			},
			"": func(t *rapid.T) {
				sub, acks := src.Queue()
				published := 0
				if len(edges) > 0 {
					published = edges[len(edges)-1]
				}
				want := max(0, published-taken)
				if sub.Frames != uint64(want) {
					t.Fatalf("submit queue: %d frames, want %d (published %d, taken %d)", sub.Frames, want, published, taken)
				}
				if want == 0 {
					if sub.Bytes != 0 || sub.Sojourn != 0 {
						t.Fatalf("empty submit queue reports %d bytes, sojourn %v", sub.Bytes, sub.Sojourn)
					}
				} else {
					// The batch the oldest waiting frame came in, and what its edges give.
					from := 0
					for _, e := range edges {
						if e > taken {
							break
						}
						from = e
					}
					to := published
					for _, e := range edges {
						if e > taken {
							to = e
							break
						}
					}
					lo, hi := sum(sizes[to:published]), sum(sizes[from:published])
					exact := sum(sizes[taken:published])
					if sub.Bytes < uint64(lo) || sub.Bytes > uint64(hi) || (from == taken && sub.Bytes != uint64(exact)) {
						t.Fatalf("submit queue: %d bytes, want %d (within [%d, %d])", sub.Bytes, exact, lo, hi)
					}
				}
				if acks.Frames != uint64(acked) || acks.Bytes != 0 || acks.Sojourn != 0 {
					t.Fatalf("ack queue: %+v, want %d frames", acks, acked)
				}
			},
		})
	})
}

func sum(sizes []int) (n int) {
	for _, s := range sizes {
		n += s
	}
	return n
}

// The oldest waiting frame's age is measured from the Wakeup that published it.
func TestQueueSojourn(t *testing.T) {
	src, snk, err := NewHeapStream(Config{QueueSize: 8, BulkSize: 8 * BlockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer snk.Close()
	for range 2 {
		p, _ := src.Alloc(100)
		src.TrySubmit(p)
	}
	src.Wakeup()
	time.Sleep(20 * time.Millisecond)
	p, _ := src.Alloc(60)
	src.TrySubmit(p)
	src.Wakeup()
	sub, _ := src.Queue()
	if sub.Frames != 3 || sub.Bytes != 260 || sub.Sojourn < 20*time.Millisecond {
		t.Fatalf("queue %+v, want 3 frames, 260 bytes, sojourn >= 20ms", sub)
	}
	for range 2 {
		snk.TryGet()
	}
	snk.Wakeup()
	if sub, _ = src.Queue(); sub.Frames != 1 || sub.Bytes != 60 || sub.Sojourn >= 20*time.Millisecond {
		t.Fatalf("queue %+v, want the last frame of 60 bytes, younger than 20ms", sub)
	}
}

// Queue from another goroutine while both sides stream: under -race, the depth reads only what
// the source publishes atomically, never its private records or the frames.
func TestQueueConcurrent(t *testing.T) {
	cfg := Config{QueueSize: 16, BulkSize: 32 * BlockSize}
	src, snk, err := NewHeapStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	defer snk.Close()
	const n = 20000
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for sent := 0; sent < n; {
			src.ReleaseAcked()
			for k := 0; k < 5 && sent < n; k++ {
				p, ok := src.Reserve(64 + sent%1000)
				if !ok {
					break
				}
				p[0] = byte(sent)
				src.Commit(len(p), netdev.Offload{})
				sent++
			}
			src.Wakeup()
		}
	}()
	go func() {
		defer wg.Done()
		defer close(done)
		for got := 0; got < n; {
			p, ok := snk.TryGet()
			if !ok {
				snk.Wakeup()
				continue
			}
			got++
			for !snk.TryAck(p) {
				snk.Wakeup()
			}
			if got%7 == 0 {
				snk.Wakeup()
			}
		}
		snk.Wakeup()
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			sub, acks := src.Queue()
			if sub.Frames > uint64(cfg.QueueSize) || acks.Frames > uint64(cfg.QueueSize) || (sub.Frames == 0) != (sub.Bytes == 0) || (sub.Frames == 0 && sub.Sojourn != 0) {
				t.Errorf("queue %+v, acks %+v", sub, acks)
				return
			}
		}
	}()
	wg.Wait()
}
