package degrade

import (
	"container/list"
	"slices"
	"sync"
)

// breakers are the per-SKU breakers of a Manager (Config.PerSKU > 0), by
// SKU. Only a breaker that carries no state (circuit.clean) and that no
// call is using is ever dropped, so a dropped breaker has nothing to
// remember and its SKU's next breaker starts closed. The list holds the
// breakers that may be dropped, the least recently used at the back, at
// most keep of them: one found carrying state or in use as it reaches the
// back leaves the list and stays in the set, until a call is done with it
// or its recalibration ends, when it goes back to the list (and is
// dropped there if it is clean by then and the list is full). Every
// operation is O(1), amortized, under mu.
//
// Lock order: mu before a circuit's mu.
type breakers struct {
	mu   sync.Mutex
	m    map[string]*circuit
	lru  list.List // of *circuit; front: most recently used
	keep int
}

func newBreakers(keep int) *breakers {
	return &breakers{m: map[string]*circuit{}, keep: keep}
}

// use returns the breakers of skus, each once in the order of skus, made
// if needed, and marks them in use until release is called: a breaker in
// use is never dropped.
func (d *Manager) use(skus ...string) (cs []*circuit, release func()) {
	if d.global != nil {
		return []*circuit{d.global}, func() {}
	}
	b := d.set
	var made []*circuit
	b.mu.Lock()
	for _, s := range skus {
		c := b.m[s]
		if c == nil {
			c = newCircuit(d, s)
			b.m[s] = c
			made = append(made, c)
		} else if slices.Contains(cs, c) {
			continue
		}
		c.users++
		b.front(c)
		cs = append(cs, c)
	}
	b.trim()
	b.mu.Unlock()
	for _, c := range made {
		c.made()
	}
	return cs, func() { b.release(cs) }
}

// release ends a use of cs (see Manager.use).
func (b *breakers) release(cs []*circuit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		c.users--
		if c.users == 0 && c.elem == nil {
			c.elem = b.lru.PushFront(c)
		}
	}
	b.trim()
}

// settled puts c back in the list, at the back, if it left it while its
// recalibration ran (see runRecalibrate).
func (b *breakers) settled(c *circuit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.elem == nil && c.users == 0 && b.m[c.key] == c {
		c.elem = b.lru.PushBack(c)
		b.trim()
	}
}

// front moves c to the front of the list. Callers hold b.mu.
func (b *breakers) front(c *circuit) {
	if c.elem != nil {
		b.lru.MoveToFront(c.elem)
		return
	}
	c.elem = b.lru.PushFront(c)
}

// trim shortens the list to keep breakers: from the back, a clean breaker
// no call uses is dropped, and any other leaves the list (it is kept).
// Callers hold b.mu.
func (b *breakers) trim() {
	for b.lru.Len() > b.keep {
		c := b.lru.Remove(b.lru.Back()).(*circuit)
		c.elem = nil
		if c.users == 0 && c.clean() {
			delete(b.m, c.key)
		}
	}
}
