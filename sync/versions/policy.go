package versions

import "fmt"

// Type names a versioning policy.
type Type string

// The policies.
const (
	// None keeps nothing. The zero Type behaves as None.
	None Type = "none"
	// Trashcan keeps every replaced or deleted file for Policy.Days days
	// (0 = forever).
	Trashcan Type = "trashcan"
	// Simple keeps the newest Policy.Keep versions of each file.
	Simple Type = "simple"
	// Staggered thins versions by age, like Syncthing's staggered
	// versioning, and drops those older than Policy.Days days.
	Staggered Type = "staggered"
)

// Defaults applied by ParsePolicy, and limits it enforces.
const (
	DefaultKeep          = 5
	DefaultStaggeredDays = 365
	MaxKeep              = 100000
	MaxDays              = 36500
)

// Policy is a folder's versioning policy. Build it with ParsePolicy; the
// zero Policy keeps nothing.
type Policy struct {
	Type Type
	// Keep is, for Simple, how many versions of each file are kept.
	Keep int
	// Days is, for Trashcan, how many days versions are kept (0 =
	// forever) and, for Staggered, the maximum age of a version.
	Days int
}

// ParsePolicy checks a policy as given by a person (CLI, REST) and applies
// the defaults: Keep 5 for simple when keep is 0, Days 365 for staggered
// when days is 0. keep is allowed only for simple and days only for
// trashcan and staggered; a value that the type does not use is an error
// rather than silently ignored. Errors wrap ErrInvalidPolicy.
func ParsePolicy(typ string, keep, days int) (Policy, error) {
	p := Policy{Type: Type(typ), Keep: keep, Days: days}
	if keep < 0 || keep > MaxKeep {
		return Policy{}, fmt.Errorf("%w: keep %d is not in 0..%d", ErrInvalidPolicy, keep, MaxKeep)
	}
	if days < 0 || days > MaxDays {
		return Policy{}, fmt.Errorf("%w: days %d is not in 0..%d", ErrInvalidPolicy, days, MaxDays)
	}
	switch p.Type {
	case None:
	case Trashcan, Staggered:
	case Simple:
		if p.Keep == 0 {
			p.Keep = DefaultKeep
		}
	default:
		return Policy{}, fmt.Errorf("%w: unknown type %q (want none, trashcan, simple or staggered)", ErrInvalidPolicy, typ)
	}
	if keep != 0 && p.Type != Simple {
		return Policy{}, fmt.Errorf("%w: keep applies only to simple versioning", ErrInvalidPolicy)
	}
	if days != 0 && p.Type != Trashcan && p.Type != Staggered {
		return Policy{}, fmt.Errorf("%w: days applies only to trashcan and staggered versioning", ErrInvalidPolicy)
	}
	if p.Type == Staggered && p.Days == 0 {
		p.Days = DefaultStaggeredDays
	}
	return p, nil
}

// active reports whether p keeps versions at all.
func (p Policy) active() bool {
	return p.Type == Trashcan || p.Type == Simple || p.Type == Staggered
}
