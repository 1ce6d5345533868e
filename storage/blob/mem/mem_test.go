package mem_test

import (
	"testing"

	"go.uber.org/goleak"

	"lockstep/storage/blob"
	"lockstep/storage/blob/blobtest"
	"lockstep/storage/blob/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(*testing.T) blob.Store { return mem.New() })
}

func BenchmarkPut256K(b *testing.B) {
	blobtest.BenchPut(b, mem.New(), 256<<10)
}
