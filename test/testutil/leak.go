package testutil

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs m's tests and exits with their status, failing the run if any
// goroutine is left behind when they end (goleak); a package's TestMain is
// then only `testutil.Main(m)`. A leak fails the run even when every test
// passed, because no goroutine may outlive the component that started it.
//
// While fuzzing (-fuzz) the check is off: the fuzzing engine's own
// goroutines may still be winding down when m.Run returns. Fuzz seeds still
// run under the check in a plain `go test`.
func Main(m *testing.M) {
	if fuzzing() {
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}

// fuzzing reports whether this test binary was asked to fuzz.
func fuzzing() bool {
	flag.Parse()
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}
