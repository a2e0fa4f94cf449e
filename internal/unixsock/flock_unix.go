//go:build unix

package unixsock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// flock takes an exclusive lock on f without waiting.
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return fmt.Errorf("another process serves it (it holds %s)", f.Name())
		default:
			return fmt.Errorf("locking %s: %w", f.Name(), err)
		}
	}
}
