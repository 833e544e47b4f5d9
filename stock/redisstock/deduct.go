package redisstock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Deduct places a hold on every item of the order, or on none. On a client
// without hash slots it is one script call, shared with concurrent Deducts
// unless Config.MaxBatch is 1; on a Redis Cluster it is one round trip when
// the order's SKUs share a slot. A repeated Deduct of a held or confirmed
// order returns nil and takes nothing more. A failed Deduct leaves its
// order ID free.
//
// The order has one deadline: now plus o.HoldTTL if it is set, else plus
// the shortest hold time of its SKUs; and one bound, the latest deadline
// ExtendHold may give it: now plus the shortest MaxHoldTTL of its SKUs. An
// o.HoldTTL past that maximum is stock.ErrHoldTooLong (a *stock.SKUError
// naming the line with the shortest maximum), with nothing taken. A SKU whose state the gate lost (the registry says it was put on sale, or
// the registry itself is gone) fails with stock.ErrUnavailable, not
// stock.ErrUnknownSKU. A context already done fails with its error before
// anything is sent.
func (s *Store) Deduct(ctx context.Context, o stock.Order) (err error) {
	ctx, tr := s.obs.Track(ctx, "redisstock", observe.OpDeduct, len(o.Items))
	defer func() { tr.Done(err) }()
	if err := o.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstock: deduct: not sent: %w", err)
	}
	items := canon.Sorted(o.Items)
	ident := o.UserID + "\n" + canon.Signature(items)
	if s.cluster {
		return s.deductSlots(ctx, o, ident, items)
	}
	p := s.prepare(o, ident, items)
	if s.batch == nil {
		c := &call{ctx: ctx, o: p}
		s.deductBatch(ctx, []*call{c})
		return c.err
	}
	return s.batch.do(ctx, p)
}

// prepared is one order's part of a stock_deduct_batch.lua call.
type prepared struct {
	id    string
	items []stock.Item // sorted by SKU
	keys  []string     // directory entry, then 4 per line
	args  []any        // ID, user, identity, own hold ms, line count, quantities
}

func (s *Store) prepare(o stock.Order, ident string, items []stock.Item) *prepared {
	p := &prepared{id: o.ID, items: items}
	p.keys = make([]string, 0, 1+4*len(items))
	p.keys = append(p.keys, s.dirKey(o.ID))
	p.args = make([]any, 0, 5+len(items))
	p.args = append(p.args, o.ID, o.UserID, ident, o.HoldTTL.Milliseconds(), len(items))
	for _, it := range items {
		p.keys = s.lineKeys(p.keys, it.SKU, o.ID)
		p.args = append(p.args, it.Qty)
	}
	return p
}

// deductBatch runs the orders of calls in one script call on ctx and sets
// each call's err (closing its done channel, if any). A failed call gives
// every order the same classified error.
func (s *Store) deductBatch(ctx context.Context, calls []*call) {
	nk, na := 1, 1
	for _, c := range calls {
		nk, na = nk+len(c.o.keys), na+len(c.o.args)
	}
	keys := make([]string, 0, nk)
	args := make([]any, 0, na)
	args = append(args, s.nowMs())
	for _, c := range calls {
		keys = append(keys, c.o.keys...)
		args = append(args, c.o.args...)
	}
	keys = append(keys, s.registryKey())
	res, err := batchScript.Run(ctx, s.c, keys, args...).Slice()
	for i, c := range calls {
		switch {
		case err != nil:
			c.err = s.writeErr(c.ctx, "deduct", err)
		case len(res) != 2*len(calls):
			c.err = badReply("deduct", res)
		default:
			c.err = orderResult(c.o, res[2*i], res[2*i+1])
		}
		if c.done != nil {
			close(c.done)
		}
	}
}

// orderResult reads one order's part of the reply: nil, or the business
// error naming the failed line (or the order, for its directory entry).
func orderResult(p *prepared, code, at any) error {
	word, _ := code.(string)
	n, ok := at.(int64)
	switch {
	case word == "ok" && ok:
		return nil
	case word == "conflict" && n == 0:
		return fmt.Errorf("redisstock: order %s: %w", strconv.Quote(p.id), stock.ErrConflict)
	case ok && n >= 1 && int(n) <= len(p.items):
		if err := lineErr(word, p.items[n-1].SKU); err != nil {
			return err
		}
	}
	return badReply("deduct", []any{code, at})
}
