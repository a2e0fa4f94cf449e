package containerdtest

import (
	"context"
	"fmt"
	"log"
	"os"
	"testing"
	"time"
)

// startTimeout bounds Start from the test helpers; the first run includes
// `go install` of containerd (a minute or two).
const startTimeout = 5 * time.Minute

// InCI reports whether the environment variable CI is "true": then tests
// that cannot get a containerd fail instead of skipping.
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable ends the test because containerd is unavailable for reason
// err: t.Fatalf when InCI, t.Skipf otherwise.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("containerd is required under CI=true but unavailable: %v", err)
	}
	t.Skipf("skipping, containerd unavailable (set CI=true to make this a failure): %v", err)
}

// Require starts a private containerd for the test, stops it at cleanup,
// and returns it; if the test failed, the cleanup first logs the tail of
// containerd's log. When containerd cannot be started (not root, no runc, no
// module proxy...) the test fails under CI=true and is skipped elsewhere.
func Require(t testing.TB) *Instance {
	t.Helper()
	return require(t, Options{})
}

// RequireLegacy is Require for Debian's containerd 1.6 (Options.Legacy),
// a real CRI runtime without GetContainerEvents. The first call may install
// it with apt-get (see InstallLegacy).
func RequireLegacy(t testing.TB) *Instance {
	t.Helper()
	return require(t, Options{Legacy: true})
}

func require(t testing.TB, opts Options) *Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	opts.Logf = t.Logf
	in, err := Start(ctx, opts)
	if err != nil {
		Unavailable(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("containerd log tail:\n%s", in.LogTail(40))
		}
		if err := in.Stop(); err != nil {
			t.Errorf("stopping containerd: %v", err)
		}
	})
	return in
}

// StartForTests starts one instance for a whole test binary, from
// TestMain. On error, which the caller keeps, each test calls
// Unavailable(t, err). The caller stops the instance after m.Run:
//
//	var inst *containerdtest.Instance
//	var instErr error
//
//	func TestMain(m *testing.M) {
//		inst, instErr = containerdtest.StartForTests()
//		code := m.Run()
//		if inst != nil {
//			if err := inst.Stop(); err != nil {
//				fmt.Fprintln(os.Stderr, err)
//				code = 1
//			}
//		}
//		os.Exit(code)
//	}
//
// Progress goes to the standard error, which `go test` shows only on
// failure or with -v.
func StartForTests() (*Instance, error) {
	return startForTests(Options{})
}

// StartLegacyForTests is StartForTests for Debian's containerd 1.6
// (Options.Legacy). A test binary may start both kinds of instance.
func StartLegacyForTests() (*Instance, error) {
	return startForTests(Options{Legacy: true})
}

func startForTests(opts Options) (*Instance, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	l := log.New(os.Stderr, "", log.Ltime|log.Lmicroseconds)
	opts.Logf = func(f string, a ...any) { l.Output(2, fmt.Sprintf(f, a...)) }
	in, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return in, nil
}
