package sqlstock

import (
	"context"
	"database/sql"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/stock"
)

// DeductGroup writes orders as one group arriving in the given order, and returns each caller's outcome.
func (s *Store) DeductGroup(ctx context.Context, orders []stock.Order) []error {
	batch := make([]*gcall, len(orders))
	for i, o := range orders {
		if err := o.Validate(); err != nil {
			panic(err)
		}
		batch[i] = &gcall{ctx: ctx, o: o, items: canon.Sorted(o.Items), sent: true}
	}
	s.deductGroup(ctx, batch)
	errs := make([]error, len(batch))
	for i, c := range batch {
		errs[i] = s.settleCall(c)
	}
	return errs
}

// Groups returns how many transactions of more than one order the Store
// wrote.
func (s *Store) Groups() int64 {
	if s.group == nil {
		return 0
	}
	return s.group.groups.Load()
}

// HoldLane takes every in-flight slot of the lane of sku, as transactions
// in flight would, so that Deducts of sku queue; release gives them back
// and sends what queued meanwhile.
func (s *Store) HoldLane(sku string) (release func()) {
	g := s.group
	key := g.laneKey([]stock.Item{{SKU: sku}})
	g.mu.Lock()
	l := g.lanes[key]
	if l == nil {
		l = &lane{}
		g.lanes[key] = l
	}
	n := g.flying - l.flying
	l.flying += n
	g.mu.Unlock()
	return func() {
		for range n {
			g.next(key, l)
		}
	}
}

// Queued returns how many Deducts of sku wait for a group.
func (s *Store) Queued(sku string) int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	if l := s.group.lanes[s.group.laneKey([]stock.Item{{SKU: sku}})]; l != nil {
		return len(l.queue)
	}
	return 0
}

// DB returns the Store's database.
func (s *Store) DB() *sql.DB { return s.db }
