package redlock

import (
	"fmt"
	"strconv"
	"strings"
)

// maxSets is how many sets WithQuorumOf may name: joint mode's two.
const maxSets = 2

// quorum is what a decision needs: need yes votes among the nodes of each
// set. Without WithQuorumOf it is one set, every node, with the client's
// quorum; with it, the sets it names (joint mode: a quorum of the old set
// and one of the new, docs/reconfig.md). A node in two sets counts for
// both. It is read-only once built.
type quorum struct {
	sets []voteSet
}

// voteSet is one set of a quorum.
type voteSet struct {
	need int
	size int
	in   []bool // by node index; nil: every node
}

func (s *voteSet) has(i int) bool { return s.in == nil || s.in[i] }

// tally counts one decision's votes per set.
type tally struct {
	yes, no [maxSets]int
}

// add counts node i's answer.
func (q *quorum) add(t *tally, i int, yes bool) {
	for s := range q.sets {
		if q.sets[s].has(i) {
			if yes {
				t.yes[s]++
			} else {
				t.no[s]++
			}
		}
	}
}

// reached reports whether every set has its need of yes votes.
func (q *quorum) reached(t *tally) bool {
	for s := range q.sets {
		if t.yes[s] < q.sets[s].need {
			return false
		}
	}
	return true
}

// out reports whether some set has so many no votes that its need can no
// longer be met.
func (q *quorum) out(t *tally) bool {
	for s := range q.sets {
		if t.no[s] > q.sets[s].size-q.sets[s].need {
			return true
		}
	}
	return false
}

// holds reports whether the nodes for which yes is true make a quorum.
func (q *quorum) holds(n int, yes func(i int) bool) bool {
	t := q.count(n, yes, true)
	return q.reached(&t)
}

// lost reports whether the nodes for which no is true leave some set
// without its need.
func (q *quorum) lost(n int, no func(i int) bool) bool {
	t := q.count(n, no, false)
	return q.out(&t)
}

// count tallies the nodes of n for which f is true as yes (or no) votes.
func (q *quorum) count(n int, f func(i int) bool, yes bool) tally {
	var t tally
	for i := range n {
		if f(i) {
			q.add(&t, i, yes)
		}
	}
	return t
}

// first is the need of the first set (QuorumError.Quorum).
func (q *quorum) first() int { return q.sets[0].need }

// atLeast returns q with each set's need raised to at least f(its size)
// (a semaphore's bound).
func (q quorum) atLeast(f func(size int) int) quorum {
	sets := make([]voteSet, len(q.sets))
	for s, v := range q.sets {
		v.need = max(v.need, f(v.size))
		sets[s] = v
	}
	return quorum{sets: sets}
}

// String is the quorum for errors: "3", or in joint mode "2 of nodes 0,1,2
// and 2 of nodes 0,1,3" (node indexes as given to New).
func (q *quorum) String() string {
	if len(q.sets) == 1 && q.sets[0].in == nil {
		return strconv.Itoa(q.sets[0].need)
	}
	parts := make([]string, len(q.sets))
	for s, v := range q.sets {
		var idx []string
		for i, ok := range v.in {
			if ok {
				idx = append(idx, strconv.Itoa(i))
			}
		}
		parts[s] = fmt.Sprintf("%d of nodes %s", v.need, strings.Join(idx, ","))
	}
	return strings.Join(parts, " and ")
}

// quorumSet is one WithQuorumOf: need yes votes among nodes.
type quorumSet struct {
	need  int
	nodes []int
}

// buildQuorum makes the client's quorum for n nodes, checking the sets
// WithQuorumOf gave (the only errors). oneSet is knobs.JointOneSet: only
// the first set counts.
func (c clientConfig) buildQuorum(n int, oneSet bool) (quorum, error) {
	if len(c.sets) == 0 {
		return quorum{sets: []voteSet{{need: c.quorumFor(n), size: n}}}, nil
	}
	if len(c.sets) > maxSets {
		return quorum{}, configError("WithQuorumOf given %d times: at most %d sets (joint mode's old and new)", len(c.sets), maxSets)
	}
	covered := make([]bool, n)
	var q quorum
	for s, qs := range c.sets {
		in := make([]bool, n)
		size := 0
		for _, i := range qs.nodes {
			switch {
			case i < 0 || i >= n:
				return quorum{}, configError("WithQuorumOf set %d: node %d out of range for %d nodes", s+1, i, n)
			case in[i]:
				return quorum{}, configError("WithQuorumOf set %d: node %d given twice", s+1, i)
			}
			in[i], covered[i] = true, true
			size++
		}
		if qs.need <= size/2 || qs.need > size {
			return quorum{}, configError("WithQuorumOf set %d: need %d must be in (%d/2, %d] for its %d nodes", s+1, qs.need, size, size, size)
		}
		q.sets = append(q.sets, voteSet{need: qs.need, size: size, in: in})
	}
	for i, ok := range covered {
		if !ok {
			return quorum{}, configError("node %d is in no set of WithQuorumOf: its vote would never count", i)
		}
	}
	if oneSet { // test-only switch (internal/knobs): the first set alone
		q.sets = q.sets[:1]
	}
	return q, nil
}
