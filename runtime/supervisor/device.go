package supervisor

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/component"
)

// Device sessions are bounded so that their files fit one control-socket message and a
// request cannot ask for absurd memory before the ram check sees it.
const (
	maxDeviceFiles = 16
	maxDeviceMem   = 1 << 30
)

func checkDeviceSpec(spec component.DeviceSpec) error {
	if spec.Eventfds < 0 || len(spec.Mems)+spec.Eventfds > maxDeviceFiles {
		return fmt.Errorf("device session: %d memory regions and %d eventfds, at most %d files in all", len(spec.Mems), spec.Eventfds, maxDeviceFiles)
	}
	for i, m := range spec.Mems {
		if m <= 0 || m > maxDeviceMem {
			return fmt.Errorf("device session: memory region %d has %d bytes, want 1 to %d", i, m, maxDeviceMem)
		}
	}
	return nil
}

func deviceRAM(spec component.DeviceSpec) int {
	n := 0
	for _, m := range spec.Mems {
		n += m
	}
	return n
}

// newDeviceFiles creates a device session's files: a memfd per region, sealed to its size (a
// peer that could shrink it would make the other side's mapping fault), then the eventfds,
// blocking so that os.File never changes their mode (each side picks its own).
func newDeviceFiles(name string, spec component.DeviceSpec) ([]*os.File, error) {
	var files []*os.File
	fail := func(err error) ([]*os.File, error) {
		closeFiles(files)
		return nil, fmt.Errorf("device session %s: %w", name, err)
	}
	for i, size := range spec.Mems {
		fd, err := unix.MemfdCreate(fmt.Sprintf("nicstack-device-%s-%d", name, i), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			return fail(fmt.Errorf("memfd_create: %w", err))
		}
		files = append(files, os.NewFile(uintptr(fd), "device-mem"))
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			return fail(fmt.Errorf("sizing region %d to %d bytes: %w", i, size, err))
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
			return fail(fmt.Errorf("sealing region %d: %w", i, err))
		}
	}
	for range spec.Eventfds {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
		if err != nil {
			return fail(fmt.Errorf("eventfd: %w", err))
		}
		files = append(files, os.NewFile(uintptr(fd), "device-eventfd"))
	}
	return files, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
