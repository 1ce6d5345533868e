package check

import (
	"fmt"
	"testing"
)

func TestReportSummaryAndBound(t *testing.T) {
	var r Report
	if !r.Clean() || r.Summary() != "clean" {
		t.Fatalf("empty report: clean %v, summary %q", r.Clean(), r.Summary())
	}
	r.Add(Problem{Kind: Missing, Object: "a"})
	r.Add(Problem{Kind: Damaged, Object: "b"})
	r.Add(Problem{Kind: Missing, Object: "c"})
	if r.Clean() {
		t.Fatal("report with problems says clean")
	}
	if got, want := r.Summary(), "1 damaged, 2 missing"; got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
	for i := range MaxProblems + 5 {
		r.Add(Problem{Kind: Orphan, Object: fmt.Sprint(i)})
	}
	if len(r.Problems) != MaxProblems || r.Truncated != 8 {
		t.Fatalf("%d problems listed, %d truncated; want %d and 8", len(r.Problems), r.Truncated, MaxProblems)
	}
}
