package degrade

import (
	"container/list"
	"slices"
	"sync"
)

// breakers are the per-SKU breakers of a Manager (Config.PerSKU > 0), by
// SKU. The list holds the closed breakers no call is using (circuit.clean:
// no outage state, failure counts allowed), the least recently used at
// the back, at most keep of them: one pushed past keep is dropped, with
// its failure counts, and its SKU's next breaker starts closed. A breaker
// that carries outage state (open, recalibrating, ramping, tripped, or
// with a write at the fallback alone unread by a recalibration) is never
// in the list, nor is one in use: it stays in the set, out of the list,
// until a call is done with it or its recalibration ends and it is
// closed, when it goes back to the list. So the set holds at most keep
// closed breakers besides those with outage state and those in use.
// Every operation is O(1), amortized, under mu.
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
// use is out of the list, so never dropped.
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
		b.out(c)
		cs = append(cs, c)
	}
	b.mu.Unlock()
	defer func() {
		// An Observer hook that panics while reporting a breaker made
		// must not leave them in use for ever.
		if r := recover(); r != nil {
			b.release(cs)
			panic(r)
		}
	}()
	for _, c := range made {
		c.made()
	}
	return cs, func() { b.release(cs) }
}

// release ends a use of cs (see Manager.use): each breaker no call uses
// any more goes to the front of the list, in the order of cs, if it is
// closed.
func (b *breakers) release(cs []*circuit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		c.users--
		if c.users == 0 && c.elem == nil && c.clean() {
			c.elem = b.lru.PushFront(c)
		}
	}
	b.trim()
}

// settled puts c back in the list, at the back, if it is closed and no
// call uses it once its recalibration ended (see runRecalibrate).
func (b *breakers) settled(c *circuit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.elem == nil && c.users == 0 && b.m[c.key] == c && c.clean() {
		c.elem = b.lru.PushBack(c)
		b.trim()
	}
}

// out takes c out of the list. Callers hold b.mu.
func (b *breakers) out(c *circuit) {
	if c.elem != nil {
		b.lru.Remove(c.elem)
		c.elem = nil
	}
}

// trim shortens the list to keep breakers, dropping them from the back.
// Callers hold b.mu.
func (b *breakers) trim() {
	for b.lru.Len() > b.keep {
		c := b.lru.Remove(b.lru.Back()).(*circuit)
		c.elem = nil
		// Only a call changes the state of a breaker in the list, and it
		// takes the breaker out first; checked all the same.
		if c.users == 0 && c.clean() {
			delete(b.m, c.key)
		}
	}
}
