package faultinject

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// A master's own small disk (Config.Tmpfs, process backend): its directory
// is a tmpfs of its own, so that DiskFull can fill it without touching
// anything else on the machine. The tmpfs is mounted roomy (tmpfsRoom: a
// tmpfs only uses the memory its files do); DiskFull remounts it just
// above what it holds and fills the rest, and its Undo frees the filler
// and remounts it roomy again.

// tmpfsRoom is the size of a master's tmpfs when it is not full.
const tmpfsRoom = "1g"

// fillerName is the file DiskFull fills a master's tmpfs with.
const fillerName = "quorumlock-disk-filler"

// errNeedsRoot says a fault or option needs root.
var errNeedsRoot = errors.New("faultinject: needs root (mounting a tmpfs, creating network namespaces)")

// canMount reports why this process cannot mount a tmpfs (nil: it can).
func canMount() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("faultinject: a master's own tmpfs needs Linux, this is %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return errNeedsRoot
	}
	return nil
}

// mountTmpfs mounts a roomy tmpfs on dir, readable by its owner only.
func mountTmpfs(dir string) error {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+tmpfsRoom+",mode=0700"); err != nil {
		return fmt.Errorf("faultinject: mounting a tmpfs on %s: %w", dir, err)
	}
	return nil
}

// unmountTmpfs detaches the tmpfs on dir (its memory is freed once no
// process holds a file on it).
func unmountTmpfs(dir string) error {
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("faultinject: unmounting the tmpfs on %s: %w", dir, err)
	}
	return nil
}

// fillTmpfs shrinks the tmpfs on dir to a little above what it holds and
// fills what is left with the filler file, so that the next write there
// fails with ENOSPC. The master may be writing meanwhile: a remount below
// its usage fails, and is retried with more room (bounded).
func fillTmpfs(dir string) error {
	var err error
	for slack := int64(64 << 10); slack <= 64<<20; slack *= 4 {
		var st syscall.Statfs_t
		if err = syscall.Statfs(dir, &st); err != nil {
			return fmt.Errorf("faultinject: statfs %s: %w", dir, err)
		}
		used := int64(st.Blocks-st.Bfree) * int64(st.Bsize)
		size := used + slack
		if err = syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=%d", size)); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("faultinject: shrinking the tmpfs on %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, fillerName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("faultinject: filling %s: %w", dir, err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for range 1 << 12 { // bounded: at most 256 MiB, far above the slack
		_, err := f.Write(buf)
		if errors.Is(err, syscall.ENOSPC) {
			// Fill the last partial block too.
			for range 1 << 7 {
				if _, err := f.Write(buf[:512]); err != nil {
					return nil
				}
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("faultinject: filling %s: %w", dir, err)
		}
	}
	return fmt.Errorf("faultinject: filling %s: still not full after 256 MiB", dir)
}

// freeTmpfs removes the filler and gives the tmpfs on dir its room back.
func freeTmpfs(dir string) error {
	if err := os.Remove(filepath.Join(dir, fillerName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("faultinject: freeing %s: %w", dir, err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size="+tmpfsRoom); err != nil {
		return fmt.Errorf("faultinject: growing the tmpfs on %s: %w", dir, err)
	}
	return nil
}

// isolationAvailable reports what this machine lacks for Config.Tmpfs and
// Config.Netns (nil: nothing).
func (c Config) isolationAvailable() error {
	var errs []error
	if c.Tmpfs {
		errs = append(errs, canMount())
	}
	if c.Netns {
		errs = append(errs, canNetns())
	}
	return errors.Join(errs...)
}
