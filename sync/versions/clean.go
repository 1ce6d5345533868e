package versions

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"time"
)

const day = 24 * time.Hour

// staggerStep is one interval of staggered thinning: versions younger than
// end are kept at most one per step.
type staggerStep struct {
	step, end time.Duration
}

// staggerSteps are Syncthing's intervals; the last one ends at the
// policy's maximum age.
var staggerSteps = [...]staggerStep{
	{30 * time.Second, time.Hour},
	{time.Hour, day},
	{day, 30 * day},
	{7 * day, 0}, // end: Policy.Days
}

// Clean applies the policy at time now and returns the versions it
// removed, newest first:
//   - trashcan: versions archived more than Days days before now (none
//     if Days is 0);
//   - simple: all but the newest Keep versions of each file;
//   - staggered: Syncthing's thinning. Going from the oldest version of a
//     file to the newest, a version is removed if it is older than Days
//     days, or if it was archived less than a step after the last version
//     kept, the step depending on its age: 30 s within the first hour, an
//     hour within the first day, a day within the first 30 days, a week
//     after that. The oldest version within Days is always kept.
//   - none: nothing; versions kept under an earlier policy stay.
//
// Archive directories left empty by the removals are removed too, up to
// but not including Dir. Clean goes on after a failed removal and returns
// every error joined; the versions it returns were removed.
func (a *Archive) Clean(now time.Time) ([]Version, error) {
	if !a.policy.active() {
		return nil, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	all, err := a.List("")
	if err != nil {
		return nil, err
	}
	drop := a.policy.drop(all, now)
	var removed []Version
	var errs []error
	for _, v := range drop {
		err := a.fs.Remove(Dir + "/" + v.ID)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing version %s: %w", v.ID, err))
			continue
		}
		if err == nil {
			removed = append(removed, v)
		}
		a.removeEmptyDirs(path.Dir(v.ID))
	}
	return removed, errors.Join(errs...)
}

// removeEmptyDirs removes the archive directory rel and its parents below
// Dir for as long as they are empty. A directory that is not empty, or
// cannot be removed, stops it quietly: it was left as it was.
func (a *Archive) removeEmptyDirs(rel string) {
	for rel != "." && rel != "/" && rel != "" {
		entries, err := a.fs.ReadDir(Dir + "/" + rel)
		if err != nil || len(entries) > 0 {
			return
		}
		if a.fs.Remove(Dir+"/"+rel) != nil {
			return
		}
		rel = path.Dir(rel)
	}
}

// drop returns the versions of vs (in List's order) that p removes at now,
// in the same order.
func (p Policy) drop(vs []Version, now time.Time) []Version {
	var out []Version
	switch p.Type {
	case Trashcan:
		if p.Days == 0 {
			return nil
		}
		limit := now.Add(-time.Duration(p.Days) * day)
		for _, v := range vs {
			if v.Time.Before(limit) {
				out = append(out, v)
			}
		}
	case Simple:
		seen := make(map[string]int)
		for _, v := range vs {
			seen[v.Path]++
			if seen[v.Path] > p.Keep {
				out = append(out, v)
			}
		}
	case Staggered:
		byPath := make(map[string][]Version)
		for _, v := range vs {
			byPath[v.Path] = append(byPath[v.Path], v)
		}
		for _, fvs := range byPath {
			out = append(out, p.stagger(fvs, now)...)
		}
		slices.SortFunc(out, Version.compare)
	}
	return out
}

// stagger returns the versions of one file (newest first) that staggered
// thinning removes at now. Ages are compared in whole seconds, as
// Syncthing does.
func (p Policy) stagger(vs []Version, now time.Time) []Version {
	maxAge := time.Duration(p.Days) * day
	var out []Version
	var prevAge time.Duration
	first := true
	for i := len(vs) - 1; i >= 0; i-- { // oldest first
		v := vs[i]
		age := now.Sub(v.Time).Truncate(time.Second)
		if age > maxAge {
			out = append(out, v)
			continue
		}
		if first {
			prevAge, first = age, false
			continue
		}
		step := staggerSteps[len(staggerSteps)-1].step
		for _, s := range staggerSteps[:len(staggerSteps)-1] {
			if age < s.end {
				step = s.step
				break
			}
		}
		if prevAge-age < step {
			out = append(out, v)
			continue
		}
		prevAge = age
	}
	return out
}
