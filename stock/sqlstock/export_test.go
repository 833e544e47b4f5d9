package sqlstock

import (
	"context"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/stock"
)

// DeductGroup writes orders, which must name the same SKUs, as one group
// arriving in the given order, and returns each caller's outcome.
func (s *Store) DeductGroup(ctx context.Context, orders []stock.Order) []error {
	batch := make([]*gcall, len(orders))
	for i, o := range orders {
		if err := o.Validate(); err != nil {
			panic(err)
		}
		batch[i] = &gcall{ctx: ctx, o: o, items: canon.Sorted(o.Items), sent: true, done: make(chan struct{})}
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
