package redisstock

import (
	"context"
	"strings"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Deduct places a hold on every item of the order, or on none. On a client
// without hash slots it is one script call, shared with concurrent Deducts
// unless Config.MaxBatch is 1; on a Redis Cluster it is one round trip when
// the order's SKUs share a slot, shared likewise with the concurrent
// Deducts of that slot. A repeated Deduct of a held or confirmed
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
	defer named(&err, "deduct order", o.ID)
	if err := o.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return notSent(err)
	}
	if err := s.ready(ctx); err != nil {
		return err
	}
	if s.cluster {
		items := canon.Sorted(o.Items)
		if s.bucketed {
			return s.deductBuckets(ctx, o, items)
		}
		ident := o.UserID + "\n" + canon.Signature(items)
		return s.deductSlots(ctx, o, ident, items)
	}
	c := &call{ctx: ctx}
	s.prepare(&c.o, o)
	if s.batch == nil {
		_ = s.deductBatch(ctx, []*call{c})
		return c.err
	}
	return s.batch.do(ctx, c)
}

// prepared is one order's part of a stock_deduct_batch.lua call: its keys
// and identity are substrings of one string, passed by pointer into the
// prepared order itself (a copy: a batch may be sent after its caller
// left).
type prepared struct {
	id, user string
	ident    string       // user + "\n" + canonical signature
	items    []stock.Item // sorted by SKU
	own, n   int64        // own hold time ms, line count
	keys     []string     // directory shard, then 4 per line
	refs     []any        // pointers to keys, then to the arguments: ID, user, identity, own hold ms, line count, quantities
	nkeys    int          // refs[:nkeys] are the keys
	inline   struct {     // backing of items, keys and refs for a one-line order
		items [1]stock.Item
		keys  [5]string
		refs  [11]any
	}
}

// prepare fills p with the order's keys and arguments.
func (s *Store) prepare(p *prepared, o stock.Order) {
	items := p.inline.items[:]
	if len(o.Items) == 1 {
		items[0] = o.Items[0]
	} else {
		items = canon.Sorted(o.Items)
	}
	p.id, p.user, p.items = o.ID, o.UserID, items
	p.own, p.n = o.HoldTTL.Milliseconds(), int64(len(items))
	// One string: the line keys, then the identity.
	size := len(o.UserID) + 1 + canon.SignatureLen(items)
	for _, it := range items {
		size += 4 * s.keyLen(it.SKU, len(stateSuffix))
	}
	var b strings.Builder
	b.Grow(size)
	var ends [4 * stock.MaxItems]int
	for i, it := range items {
		for k, suffix := range [...]string{stateSuffix, holdsSuffix, usersSuffix, linesSuffix} {
			s.writeSKUKey(&b, it.SKU, suffix, "")
			ends[4*i+k] = b.Len()
		}
	}
	identAt := b.Len()
	b.WriteString(o.UserID)
	b.WriteByte('\n')
	canon.WriteSignature(&b, items)
	all := b.String()
	p.ident = all[identAt:]

	nk, na := 1+4*len(items), 5+len(items)
	if len(items) == 1 {
		p.keys, p.refs = p.inline.keys[:nk], p.inline.refs[:0:nk+na]
	} else {
		p.keys, p.refs = make([]string, nk), make([]any, 0, nk+na)
	}
	p.keys[0] = s.dirKey(o.ID)
	from := 0
	for i := 1; i < nk; i++ {
		p.keys[i] = all[from:ends[i-1]]
		from = ends[i-1]
	}
	for i := range p.keys {
		p.refs = append(p.refs, &p.keys[i])
	}
	p.nkeys = nk
	p.refs = append(p.refs, &p.id, &p.user, &p.ident, &p.own, &p.n)
	for i := range p.items {
		p.refs = append(p.refs, &p.items[i].Qty)
	}
}

// deductBatch runs the orders of calls in one script call on ctx and sets
// each call's err: a batch of the
// flash sale's shape in stock_deduct_hot.lua (and the orders it leaves in
// a second call), any other in stock_deduct_batch.lua. A failed call gives
// every order the same classified error, which it returns.
func (s *Store) deductBatch(ctx context.Context, calls []*call) error {
	if s.hotBatch(calls) {
		slow, err := s.deductHot(ctx, calls)
		if err != nil || len(slow) == 0 {
			return err
		}
		calls = slow // repeats, conflicts, a SKU not on sale
	}
	nk, na := 1, 1
	for _, c := range calls {
		nk, na = nk+c.o.nkeys, na+len(c.o.refs)-c.o.nkeys
	}
	args := make([]any, 3, 3+nk+na)
	args[0], args[1], args[2] = "evalsha", batchScript.Hash(), nk
	for _, c := range calls {
		args = append(args, c.o.refs[:c.o.nkeys]...)
	}
	args = append(args, s.registryKey(), s.nowMs())
	for _, c := range calls {
		args = append(args, c.o.refs[c.o.nkeys:]...)
	}
	res, err := s.c.Do(ctx, args...).Slice()
	if err != nil && isNoScript(err) {
		args[0], args[1] = "eval", batchSource
		res, err = s.c.Do(ctx, args...).Slice()
	}
	for i, c := range calls {
		switch {
		case err != nil:
			c.err = s.writeErr(c.ctx, err)
		case len(res) != len(calls):
			c.err = badReply(res)
		default:
			c.err = orderResult(&c.o, res[i])
		}
	}
	return s.writeErr(ctx, err)
}

// batchSource is stock_deduct_batch.lua (batchScript), which deductBatch
// sends itself (not through redis.Script, to pass its keys by pointer)
// when the server lacks it.
var batchSource = lua.Script("stock_deduct_batch.lua")

// batchCodes are the refusal codes of stock_deduct_batch.lua's reply, by
// number.
var batchCodes = [...]string{1: "unknown_sku", 2: "unavailable", 3: "sold_out", 4: "limit",
	5: "need_user", 6: "conflict", 7: "expired", 8: "closed", 9: "hold_too_long"}

// orderResult reads one order's part of the reply (0, or a refusal code
// plus 16 times the failed line: 0 for the directory entry): nil, or the
// business error naming the failed line (or the order, for its directory
// entry).
func orderResult(p *prepared, reply any) error {
	v, ok := reply.(int64)
	switch {
	case !ok:
		return badReply(reply)
	case v >= 0 && v < int64(len(batchCodes)) && batchCodes[v] == "conflict": // line 0: the directory entry
		return orderErr(p.id, stock.ErrConflict)
	}
	return lineResult(v, p.items)
}

// lineResult reads an order's integer answer of a deduct script that names
// a line (0, or a refusal code plus 16 times the failed line): nil, or the
// business error naming the failed line of items.
func lineResult(v int64, items []stock.Item) error {
	code, at := v%16, v/16
	switch {
	case v == 0:
		return nil
	case v > 0 && int(code) < len(batchCodes) && at >= 1 && int(at) <= len(items):
		if err := lineErr(batchCodes[code], items[at-1].SKU); err != nil {
			return err
		}
	}
	return badReply(v)
}
