package versions

import (
	"errors"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	ok := []struct {
		typ        string
		keep, days int
		want       Policy
	}{
		{"none", 0, 0, Policy{Type: None}},
		{"trashcan", 0, 0, Policy{Type: Trashcan}},
		{"trashcan", 0, 7, Policy{Type: Trashcan, Days: 7}},
		{"simple", 0, 0, Policy{Type: Simple, Keep: DefaultKeep}},
		{"simple", 1, 0, Policy{Type: Simple, Keep: 1}},
		{"simple", MaxKeep, 0, Policy{Type: Simple, Keep: MaxKeep}},
		{"staggered", 0, 0, Policy{Type: Staggered, Days: DefaultStaggeredDays}},
		{"staggered", 0, 1, Policy{Type: Staggered, Days: 1}},
		{"staggered", 0, MaxDays, Policy{Type: Staggered, Days: MaxDays}},
	}
	for _, c := range ok {
		got, err := ParsePolicy(c.typ, c.keep, c.days)
		if err != nil || got != c.want {
			t.Errorf("ParsePolicy(%q, %d, %d) = %+v, %v; want %+v", c.typ, c.keep, c.days, got, err, c.want)
		}
	}
	bad := []struct {
		typ        string
		keep, days int
	}{
		{"", 0, 0},
		{"Simple", 0, 0},
		{"external", 0, 0},
		{"simple", -1, 0},
		{"simple", MaxKeep + 1, 0},
		{"simple", 5, 1},
		{"trashcan", 0, -1},
		{"trashcan", 0, MaxDays + 1},
		{"trashcan", 1, 0},
		{"staggered", 3, 0},
		{"none", 0, 1},
		{"none", 1, 0},
	}
	for _, c := range bad {
		if p, err := ParsePolicy(c.typ, c.keep, c.days); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("ParsePolicy(%q, %d, %d) = %+v, %v; want ErrInvalidPolicy", c.typ, c.keep, c.days, p, err)
		}
	}
}
