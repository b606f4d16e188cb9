package spread

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// Member is a live replica and the groups (cursor ids) it serves.
type Member struct {
	ID     string
	Groups []string
}

// Assign gives each group served by members its preferred holder: every
// replica computes the same answer from the same members, whatever their
// order. Each group goes to the replica that ranks it highest by
// rendezvous hashing (a hash of replica and group) among those serving it
// and still below its share: ⌊groups / replicas⌋, or one more for the
// first groups / replicas mod replicas replicas to reach it, so that
// replicas serving the same groups hold as many each, give or take one.
// Groups served by fewer replicas are placed first; a group whose servers
// are all at their share goes to the least loaded of them. When a replica
// leaves, only the groups it held, and the few its leaving lets settle
// back within the share, change hands.
func Assign(members []Member) map[string]string {
	servers := map[string][]string{}
	for _, m := range members {
		for _, g := range m.Groups {
			if !slices.Contains(servers[g], m.ID) {
				servers[g] = append(servers[g], m.ID)
			}
		}
	}
	groups := make([]string, 0, len(servers))
	for g := range servers {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(servers[a]), len(servers[b])), cmp.Compare(a, b))
	})
	base := len(groups) / max(len(members), 1)
	extra := len(groups) - base*len(members) // replicas that may hold base + 1
	load := map[string]int{}
	out := make(map[string]string, len(groups))
	for _, g := range groups {
		ranked := slices.Clone(servers[g])
		slices.SortFunc(ranked, func(a, b string) int {
			return cmp.Or(cmp.Compare(score(b, g), score(a, g)), cmp.Compare(a, b))
		})
		pick := ""
		for _, r := range ranked {
			if load[r] < base || load[r] == base && extra > 0 {
				pick = r
				if load[r] == base {
					extra--
				}
				break
			}
		}
		if pick == "" {
			pick = slices.MinFunc(ranked, func(a, b string) int { return cmp.Compare(load[a], load[b]) })
		}
		out[g] = pick
		load[pick]++
	}
	return out
}

// score is replica's rendezvous weight for group.
func score(replica, group string) uint64 {
	h := sha256.Sum256([]byte(replica + "\x00" + group))
	return binary.BigEndian.Uint64(h[:8])
}
