package spread_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/burnpoller/burnpoller/spread"
)

func members(replicas, groups int) []spread.Member {
	var gs []string
	for g := range groups {
		gs = append(gs, fmt.Sprintf("%d:0x%040x", 1+g, g))
	}
	var out []spread.Member
	for r := range replicas {
		out = append(out, spread.Member{ID: fmt.Sprintf("pod-%d/1/%08x", r, r*7919), Groups: slices.Clone(gs)})
	}
	return out
}

// TestAssignKeepsEachReplicaWithinItsShare: for every count of groups and
// replicas that serve them all, each group has one preferred holder, a
// replica that serves it, and every replica holds ⌊G/R⌋ or ⌈G/R⌉; every
// replica computes the same assignment whatever order it reads the
// members in.
func TestAssignKeepsEachReplicaWithinItsShare(t *testing.T) {
	t.Parallel()
	for g := 1; g <= 12; g++ {
		for r := 1; r <= 5; r++ {
			ms := members(r, g)
			a := spread.Assign(ms)
			if len(a) != g {
				t.Fatalf("G=%d R=%d: %d groups assigned", g, r, len(a))
			}
			load := map[string]int{}
			for _, holder := range a {
				load[holder]++
			}
			// As many each, give or take one: at most ⌈G/R⌉, and
			// at least ⌊G/R⌋ (a replica holding none counts).
			low, high := g/r, (g+r-1)/r
			if len(load) < r {
				load[""] = 0
			}
			for holder, n := range load {
				if n > high || n < low {
					t.Errorf("G=%d R=%d: %q holds %d groups, want %d to %d", g, r, holder, n, low, high)
				}
			}
			slices.Reverse(ms)
			if b := spread.Assign(ms); !maps.Equal(a, b) {
				t.Errorf("G=%d R=%d: the assignment depends on the members' order", g, r)
			}
		}
	}
}

// TestAssignMovesOnlyTheGroupsItMust: when a replica leaves, the groups
// of the others mostly stay where they were, and when it comes back the
// assignment is what it was.
func TestAssignMovesOnlyTheGroupsItMust(t *testing.T) {
	t.Parallel()
	ms := members(4, 12)
	before := spread.Assign(ms)
	gone := ms[1].ID
	after := spread.Assign(slices.Delete(slices.Clone(ms), 1, 2))
	moved, held := 0, 0
	for g, r := range before {
		if r == gone {
			held++
			continue
		}
		if after[g] != r {
			moved++
		}
	}
	// 12 groups on 3 replicas: a share of 4. The gone replica's 3 groups
	// go to the others; at most as many others move to make room.
	if held == 0 || moved > held {
		t.Fatalf("the leaving replica held %d groups and %d other groups moved: %v -> %v", held, moved, before, after)
	}
	if back := spread.Assign(ms); !maps.Equal(back, before) {
		t.Fatalf("the replica back, the assignment is %v, was %v", back, before)
	}
}

// TestAssignGivesAGroupOnlyToItsServers: replicas of deployments serving
// other groups share one table; a group goes only to a replica that serves
// it, even above its share.
func TestAssignGivesAGroupOnlyToItsServers(t *testing.T) {
	t.Parallel()
	ms := []spread.Member{
		{ID: "a", Groups: []string{"eth", "base", "arb", "op"}},
		{ID: "b", Groups: []string{"poly"}},
		{ID: "c", Groups: []string{"poly"}},
	}
	a := spread.Assign(ms)
	for _, g := range []string{"eth", "base", "arb", "op"} {
		if a[g] != "a" {
			t.Errorf("%s went to %q, which does not serve it", g, a[g])
		}
	}
	if a["poly"] != "b" && a["poly"] != "c" {
		t.Errorf("poly went to %q", a["poly"])
	}
	if len(spread.Assign(nil)) != 0 {
		t.Error("no members, yet groups assigned")
	}
}
