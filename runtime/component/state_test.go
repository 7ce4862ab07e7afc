package component

import (
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// A component maps the state region the supervisor handed it when it has its Spec's size, and
// refuses one of another size; without the variable it has none.
func TestMapState(t *testing.T) {
	spec := Spec{Binary: "keeper", State: 8192}
	if mem, err := mapState(spec); mem != nil || err != nil {
		t.Fatalf("without %s: %v, %v", StateFDEnv, mem, err)
	}
	for _, size := range []int{8192, 4096} {
		fd, err := unix.MemfdCreate("state", 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			t.Fatal(err)
		}
		t.Setenv(StateFDEnv, strconv.Itoa(fd)) // mapState closes it
		mem, err := mapState(spec)
		if (err == nil) != (size == spec.State) || err == nil && len(mem) != size {
			t.Fatalf("a region of %d bytes: %d mapped, %v", size, len(mem), err)
		}
		if mem != nil {
			unix.Munmap(mem)
		}
	}
	t.Setenv(StateFDEnv, "x")
	if _, err := mapState(spec); err == nil {
		t.Fatal("no error for a bad descriptor number")
	}
}
