package chain

import (
	"github.com/ethereum/go-ethereum/common"
)

// grower builds a slice element by element in blocks, then copies it once
// to its length: append grows a large slice by a quarter at a time,
// allocating up to five times its final size; this allocates twice it.
type grower[T any] struct {
	done [][]T
	cur  []T
	n    int
}

// growerBlock is the most elements of one block.
const growerBlock = 256

// add returns a new element, zero.
func (g *grower[T]) add() *T {
	if len(g.cur) == cap(g.cur) {
		if g.cur != nil {
			g.done = append(g.done, g.cur)
		}
		g.cur = make([]T, 0, min(max(2*cap(g.cur), 1), growerBlock))
	}
	g.cur = g.cur[:len(g.cur)+1]
	g.n++
	var zero T
	g.cur[len(g.cur)-1] = zero
	return &g.cur[len(g.cur)-1]
}

// drop takes back the element add returned last.
func (g *grower[T]) drop() {
	g.cur = g.cur[:len(g.cur)-1]
	g.n--
}

// slice is the elements added: an empty one, not nil, if none.
func (g *grower[T]) slice() []T {
	switch {
	case g.cur == nil:
		return []T{}
	case len(g.done) == 0:
		return g.cur[:len(g.cur):len(g.cur)]
	}
	out := make([]T, 0, g.n)
	for _, b := range g.done {
		out = append(out, b...)
	}
	return append(out, g.cur...)
}

// hashBlock and dataBlock are the largest blocks decoded hashes and data
// are cut from: a reply's first blocks are smaller, so that a small reply
// costs little.
const (
	maxHashBlock = 512
	maxDataBlock = 32 << 10
)

// blockMark is where the reader's blocks of hashes and data are: cutting
// goes on from there.
type blockMark struct{ hashGen, hashLen, dataGen, dataLen int }

// mark is where the reader's blocks are now.
func (d *replyReader) mark() blockMark {
	return blockMark{d.hashGen, len(d.hashBlock), d.dataGen, len(d.dataBlock)}
}

// reclaim gives back what was cut from the reader's blocks since m (the
// topics and data of a log not kept), the next cuts reusing it.
func (d *replyReader) reclaim(m blockMark) {
	if d.hashGen == m.hashGen {
		d.hashBlock = d.hashBlock[:m.hashLen]
	} else {
		d.hashBlock = d.hashBlock[:0] // a block begun since: all of it
	}
	if d.dataGen == m.dataGen {
		d.dataBlock = d.dataBlock[:m.dataLen]
	} else {
		d.dataBlock = d.dataBlock[:0]
	}
}

// hashes returns n hashes cut from the reader's block.
func (d *replyReader) hashes(n int) []common.Hash {
	if cap(d.hashBlock)-len(d.hashBlock) < n {
		d.hashBlock = make([]common.Hash, 0, max(min(2*cap(d.hashBlock), maxHashBlock), n, 4))
		d.hashGen++
	}
	l := len(d.hashBlock)
	d.hashBlock = d.hashBlock[:l+n]
	return d.hashBlock[l : l+n : l+n]
}

// bytes returns n bytes cut from the reader's block, or of their own when
// many.
func (d *replyReader) bytes(n int) []byte {
	if n > maxDataBlock/4 {
		return make([]byte, n)
	}
	if cap(d.dataBlock)-len(d.dataBlock) < n {
		d.dataBlock = make([]byte, 0, max(min(2*cap(d.dataBlock), maxDataBlock), 256, n))
		d.dataGen++
	}
	l := len(d.dataBlock)
	d.dataBlock = d.dataBlock[:l+n]
	return d.dataBlock[l : l+n : l+n]
}
