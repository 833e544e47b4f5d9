package redisstock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/stock"
)

var _ stock.OrderReader = (*Store)(nil)

// ordersBatch is how many orders one pipelined read of Orders covers.
const ordersBatch = 512

// UserUnits implements stock.OrderReader: the SKU's per-user count, read
// with the SKU's state in one round trip. A SKU whose state Redis lost is
// stock.ErrUnavailable, as for Deduct; a rebuilt one counts from zero
// again (the record's count stays exact).
func (s *Store) UserUnits(ctx context.Context, sku, userID string) (_ int64, err error) {
	defer named(&err, "read user units of SKU", sku)
	if err := stock.ValidateID("sku", sku); err != nil {
		return 0, err
	}
	if err := stock.ValidateID("userID", userID); err != nil {
		return 0, err
	}
	if b, err := s.splitSKU(ctx, sku); err != nil {
		return 0, err
	} else if b != nil {
		sku = b.names[b.home(userID, "")] // the user's bucket counts the user
	}
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	var on *redis.BoolCmd
	var n *redis.StringCmd
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		on = p.HExists(ctx, s.stateKey(sku), "hold")
		n = p.HGet(ctx, s.usersKey(sku), userID)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) { // on's error first, if it failed
		return 0, s.readErr(ctx, err)
	}
	if !on.Val() {
		return 0, s.missingErr(ctx, sku) // unknown, or lost with Redis's data
	}
	units, err := n.Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, badReply(n.Val())
	}
	return units, nil
}

// Orders implements stock.OrderReader: what Redis knows of each order, in
// two round trips per 512 IDs (the directory entries, then the line
// records). An order whose directory entry or line records are gone (past
// Config.Retention, or flushed) is StateUnknown.
//
// The lines of a multi-slot order change state one slot after another; when
// they disagree, Orders reports StateHeld if any line is still held; else,
// when a line has ended (expired, reverted, refunded) beside confirmed
// ones, the first ended line's state: such an order is not a sale at the
// gate (a Confirm of it expires every line, a Revert returns them); else
// the first line's state. Deadline is the order's deadline (its lines share
// one; the earliest, should they differ). Items are the order's lines as
// ordered, Returned what partial reverts gave back (stock.PartialReverter).
func (s *Store) Orders(ctx context.Context, ids []string) (_ []stock.OrderInfo, err error) {
	defer named(&err, "read orders", "")
	for i, id := range ids {
		if err := stock.ValidateID("ids["+strconv.Itoa(i)+"]", id); err != nil {
			return nil, err
		}
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	out := make([]stock.OrderInfo, len(ids))
	for start := 0; start < len(ids); start += ordersBatch {
		batch := ids[start:min(start+ordersBatch, len(ids))]
		if err := s.ordersBatch(ctx, batch, out[start:]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ordersBatch fills out[:len(ids)].
func (s *Store) ordersBatch(ctx context.Context, ids []string, out []stock.OrderInfo) error {
	dirs := make([]*redis.StringCmd, len(ids))
	var at *redis.TimeCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, id := range ids {
			dirs[i] = p.HGet(ctx, s.dirKey(id), id)
		}
		at = p.Time(ctx)
	})
	now, err := serverMs(at) // the ends of entries and records are the server's time
	if err != nil {
		return s.readErr(ctx, err)
	}
	type line struct {
		order int
		sku   string
		cmd   *redis.StringCmd
	}
	var lines []line
	items := make([][]stock.Item, len(ids))
	for i, c := range dirs {
		out[i] = stock.OrderInfo{ID: ids[i]}
		v, err := c.Result()
		if err != nil && err != redis.Nil {
			return s.readErr(ctx, err)
		}
		d, ok, err := parseEntry(v, now)
		if err != nil {
			return badReply(v)
		}
		if !ok {
			continue
		}
		its, err := parseIdent(d.ident)
		if err != nil {
			return badReply(d.ident)
		}
		items[i] = its
		out[i].UserID = userOf(d.ident)
	}
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, its := range items {
			for _, it := range its {
				lines = append(lines, line{order: i, sku: it.SKU, cmd: p.HGet(ctx, s.linesKey(it.SKU), ids[i])})
			}
		}
	})
	states := make([][]stock.State, len(ids))
	returned := make([]map[string]int64, len(ids))
	for _, l := range lines {
		v, err := l.cmd.Result()
		if err != nil && err != redis.Nil {
			return s.readErr(ctx, err)
		}
		r, ok, err := parseRecord(v, now)
		if err != nil {
			return badReply(v)
		}
		states[l.order] = append(states[l.order], stateNamed(r.st)) // StateUnknown without a record
		if !ok {
			continue
		}
		if r.ret != 0 {
			if returned[l.order] == nil {
				returned[l.order] = map[string]int64{}
			}
			returned[l.order][skuOf(l.sku)] = r.ret
		}
		if d := time.UnixMilli(r.dl); out[l.order].Deadline.IsZero() || d.Before(out[l.order].Deadline) {
			out[l.order].Deadline = d
		}
	}
	for i := range ids {
		st := combine(states[i])
		if st == stock.StateUnknown {
			out[i] = stock.OrderInfo{ID: ids[i]}
			continue
		}
		for j := range items[i] {
			items[i][j].SKU = skuOf(items[i][j].SKU) // the SKU, not its bucket
		}
		out[i].State, out[i].Items, out[i].Returned = st, canon.Sorted(items[i]), canon.Returned(returned[i])
	}
	return nil
}

// stateNamed maps a line record's st field to a stock.State (StateUnknown
// for none).
func stateNamed(st string) stock.State { return stockStates[st] }

var stockStates = map[string]stock.State{"held": stock.StateHeld, "confirmed": stock.StateConfirmed,
	"reverted": stock.StateReverted, "refunded": stock.StateRefunded, "expired": stock.StateExpired}

// combine is the state of an order from the states of its lines: their
// common state; held while any line is held; else the first ended state
// (a confirmed line beside an ended one is half of a Confirm that never
// completed, or of a refund); else the first known state.
func combine(lines []stock.State) stock.State {
	if slices.Contains(lines, stock.StateHeld) {
		return stock.StateHeld
	}
	ended := func(st stock.State) bool {
		return st == stock.StateExpired || st == stock.StateReverted || st == stock.StateRefunded
	}
	if i := slices.IndexFunc(lines, ended); i >= 0 {
		return lines[i]
	}
	if i := slices.IndexFunc(lines, func(st stock.State) bool { return st != stock.StateUnknown }); i >= 0 {
		return lines[i]
	}
	return stock.StateUnknown
}
