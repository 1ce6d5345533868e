package events

import (
	"testing"

	"lockstep/test/testutil"
)

// TestMain checks that no test leaves a goroutine behind.
func TestMain(m *testing.M) { testutil.Main(m) }
