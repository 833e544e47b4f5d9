package redisstock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// attempt is one Deduct call on a Redis Cluster, with the token that
// marks what it wrote (see "Deduct: one script call, shared" in the
// package doc).
type attempt struct {
	o      stock.Order
	ident  string
	token  string
	now    int64
	own    int64 // the order's own hold time ms (Order.HoldTTL), or 0
	groups [][]stock.Item
	// capDeadline and capBound (ms; 0: none) are the latest deadline and
	// bound its new lines may get (orderDeadline); lines already held keep
	// theirs.
	capDeadline, capBound int64
	capSKU                string // the first SKU (by name) with the shortest maximum hold time
	// ended: the bind found the order's entry ended; the attempt takes no
	// new line, and answers as its lines' records do.
	ended bool
	// gens are the generations of the SKUs' states (SKU -> gen) as the
	// attempt read them before it bound the order ID (stateGens).
	gens map[string]string
}

// deductSlots is Deduct on a Redis Cluster, where one script may touch one
// slot only: an attempt binds the order ID, then takes the slot groups one
// by one.
func (s *Store) deductSlots(ctx context.Context, o stock.Order, ident string, items []stock.Item) error {
	err := s.deductAttempt(ctx, o, ident, items, false)
	if _, ok := errors.AsType[*regenError](err); ok {
		// A SKU's state was recreated since the generation the attempt
		// read (it took nothing, and left its entry): the others may have
		// been too. Once more, with the generations read from the server
		// (the cache may be given an older one meanwhile, by a read that
		// was answered before the state was recreated).
		err = s.deductAttempt(ctx, o, ident, items, true)
	}
	return err
}

// regenError is the refusal of a slot group whose SKU's state is of another
// generation than the attempt read before it bound the order ID: lost and
// recreated since, maybe with the order's directory entry. It is
// stock.ErrUnavailable for that SKU.
type regenError struct{ err error }

func (e *regenError) Error() string { return e.err.Error() }
func (e *regenError) Unwrap() error { return e.err }

// stateGens sets the attempt's gens that orderDeadline did not read (an
// order of one slot group) from the Store's cache, reading in one round
// trip the SKUs it has not seen (every SKU, if fresh), before the bind; a
// state found missing reads as "" (the take refuses it, or finds it
// recreated).
func (s *Store) stateGens(ctx context.Context, a *attempt, fresh bool) error {
	var miss []string
	for _, g := range a.groups {
		for _, it := range g {
			if _, ok := a.gens[it.SKU]; ok {
				continue
			}
			if v, ok := s.gens.Load(it.SKU); ok && !fresh {
				a.gens[it.SKU] = v.(string)
			} else {
				miss = append(miss, it.SKU)
			}
		}
	}
	if len(miss) == 0 {
		return nil
	}
	cmds := make([]*redis.StringCmd, len(miss))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, sku := range miss {
			cmds[i] = p.HGet(ctx, s.stateKey(sku), "gen")
		}
	})
	for i, c := range cmds {
		v, err := c.Result()
		switch {
		case errors.Is(err, redis.Nil):
			s.keepGen(a, miss[i], "")
		case err != nil:
			return s.readErr(ctx, err)
		default:
			s.keepGen(a, miss[i], v)
		}
	}
	return nil
}

// keepGen gives the attempt gen as sku's generation ("" for a state
// missing or without one) and caches a generation found.
func (s *Store) keepGen(a *attempt, sku, gen string) {
	a.gens[sku] = gen
	if gen != "" {
		s.gens.Store(sku, gen)
	}
}

// deductAttempt is one attempt of deductSlots; fresh reads the SKUs'
// generations from the server (see stateGens).
func (s *Store) deductAttempt(ctx context.Context, o stock.Order, ident string, items []stock.Item, fresh bool) error {
	token, err := attemptToken()
	if err != nil {
		return err
	}
	// The token ends in when the attempt's lease ends (ms, base 36): the
	// reclaimer reads it there, whatever moved the entry's check (see
	// stock_dir_check.lua).
	now := s.nowMs()
	token += "." + strconv.FormatInt(now+s.attemptLease(), 36)
	a := &attempt{o: o, ident: ident, token: token, now: now, own: o.HoldTTL.Milliseconds(), groups: s.groups(items),
		gens: make(map[string]string, len(items))}
	// The order's deadline and bound, before any group is taken.
	if err := s.orderDeadline(ctx, a); err != nil {
		return err
	}
	if err := s.stateGens(ctx, a, fresh); err != nil {
		return err
	}
	deadline, bound := int64(0), int64(0) // the order's, from the groups' replies

	// Bind the order ID to its items, then take the first slot group
	// (batched, each stage, with concurrent Deducts).
	var bind *redis.Cmd
	var take *call // the take queued by the bind's batch
	if s.slots != nil {
		c := &call{ctx: ctx, a: a}
		if err := s.slots.binds.do(ctx, c); err != nil {
			return err
		}
		bind, take = c.bind, c.take
	} else {
		bind = s.bindOne(ctx, a)
	}
	if err := bind.Err(); err != nil {
		// Nothing was taken; a bind of unknown outcome may have bound the
		// ID, which a retry of the order finds as its own.
		return s.writeErr(ctx, err)
	}
	word, stale := bindReply(bind)
	if word == "stale" {
		// Another order's entry that no attempt has bound for a lease:
		// take it over if that order holds nothing.
		var err error
		if word, err = s.takeOver(ctx, a, stale); err != nil {
			return err
		}
	}
	switch word {
	case "new", "same":
	case "ended":
		a.ended = true
	case "conflict":
		return orderErr(o.ID, stock.ErrConflict)
	default: // the script ran: what it wrote is not known
		return &outcomeError{err: badReply(bind.Val())}
	}
	var first *redis.Cmd
	if b := s.slotBatcher(a); b != nil {
		c, err := take, error(nil)
		if c != nil {
			err = b.wait(ctx, c)
		} else {
			c = &call{ctx: ctx, a: a}
			err = b.do(ctx, c)
		}
		if err != nil {
			if errors.Is(err, stock.ErrUnknownOutcome) {
				return err // sent: the group may have been taken
			}
			// Not sent (the caller's context ended while it was queued):
			// leave the entry as a refused order does.
			return s.unbind(context.WithoutCancel(ctx), a, false, err)
		}
		first = c.first
	} else {
		var multi *redis.Cmd
		s.pipelined(ctx, func(p redis.Pipeliner) { multi = s.deductGroup(ctx, p, a, a.groups[0], deadline, bound) })
		first = partReply(multi, 0)
	}

	got := make([]groupTaken, len(a.groups))
	seen := false // a record of the order was found
	for i, g := range a.groups {
		res := first
		if i > 0 {
			res = partReply(s.deductGroup(ctx, s.c, a, g, deadline, bound), 0)
		}
		if err := res.Err(); err != nil {
			err = s.writeErr(ctx, err)
			if !errors.Is(err, stock.ErrUnknownOutcome) {
				// The server refused the group for certain: undo the
				// groups taken before it, as a refused order does, so a
				// plain error means nothing is held.
				return s.refuse(ctx, a, seen, a.groups[:i], err, a.token, false)
			}
			// The group may have been taken: the caller retries with the
			// same order ID, and the reclaimer returns whatever a caller
			// who gives up leaves held.
			return err
		}
		gt, found, err := s.groupResult(ctx, res, g)
		seen = seen || found
		if err != nil {
			return s.refuse(ctx, a, seen, a.groups[:i], err, a.token, found)
		}
		got[i] = gt
		deadline, bound = minSet(deadline, gt.deadline), minSet(bound, gt.bound)
	}
	if slices.ContainsFunc(got, func(g groupTaken) bool { return g.past }) {
		// Lines held past their bound: left by an attempt of this order
		// whose own hold time passed its SKUs' maximum and that stopped
		// before its own check refused it (its reply lost). No attempt of
		// the order can succeed (each finds them), so they are dropped
		// whatever attempts are on them, and the order is refused as the
		// first attempt would have been.
		err := &stock.SKUError{SKU: a.capSKU, Err: stock.ErrHoldTooLong}
		return s.refuse(ctx, a, false, a.groups, err, "*", false)
	}
	if err := a.tooLong(got, seen); err != nil {
		// Every other check passed, as memstock checks the hold time last:
		// undo every group, as for any refusal.
		return s.refuse(ctx, a, seen, a.groups, err, a.token, false)
	}
	return s.oneDeadline(ctx, a, got, deadline, bound)
}

// orderDeadline reads the hold times and generations of every SKU of a
// multi-group order, in one round trip that writes nothing, and sets the
// attempt's caps (the order's deadline and bound, 0 where no SKU has a
// state) and capSKU, the first SKU (by name) with the shortest maximum.
func (s *Store) orderDeadline(ctx context.Context, a *attempt) error {
	if len(a.groups) == 1 {
		return nil // one script sees every SKU
	}
	var cmds []*redis.SliceCmd
	var skus []string
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for _, g := range a.groups {
			for _, it := range g {
				cmds = append(cmds, p.HMGet(ctx, s.stateKey(it.SKU), "hold", "max_ms", "gen"))
				skus = append(skus, it.SKU)
			}
		}
	})
	var hold, maxHold int64
	for i, c := range cmds {
		v, err := c.Result()
		if err != nil {
			return s.readErr(ctx, err)
		}
		gen, _ := v[2].(string) // "" for a state missing or without gen
		s.keepGen(a, skus[i], gen)
		h, ok := v[0].(string)
		if !ok {
			continue // not on sale, or lost: its group is refused
		}
		hms, err := strconv.ParseInt(h, 10, 64)
		if err != nil {
			return badReply(v)
		}
		mms := hms // a state written without max_ms reads as hold
		if m, ok := v[1].(string); ok {
			if mms, err = strconv.ParseInt(m, 10, 64); err != nil {
				return badReply(v)
			}
		}
		if hold == 0 || hms < hold {
			hold = hms
		}
		if maxHold == 0 || mms < maxHold || mms == maxHold && skus[i] < a.capSKU {
			maxHold, a.capSKU = mms, skus[i]
		}
	}
	if hold == 0 {
		return nil
	}
	if a.own > 0 {
		hold = a.own
	}
	a.capDeadline, a.capBound = a.now+hold, a.now+maxHold
	return nil
}

// groupTaken is what a slot group's deduct script reports: the order's
// deadline and bound after it, and the shortest maximum hold time of the
// lines it took now with the SKU of the first line that has it.
type groupTaken struct {
	deadline, bound int64
	maxHold         int64  // ms; 0 when the group took no new line
	maxSKU          string // the first line with maxHold
	past            bool   // a held line found here has a deadline past its bound
}

// tooLong checks an order of several slot groups against its own hold
// time, once every group passed its other checks, naming the first line
// (by SKU) with the shortest maximum, as memstock does. A repeat (seen)
// keeps its first deadline: its HoldTTL is not part of its identity.
func (a *attempt) tooLong(got []groupTaken, seen bool) error {
	if a.own == 0 || seen || len(a.groups) == 1 {
		return nil
	}
	var best groupTaken
	for _, g := range got {
		if g.maxHold > 0 && (best.maxHold == 0 || g.maxHold < best.maxHold ||
			g.maxHold == best.maxHold && g.maxSKU < best.maxSKU) {
			best = g
		}
	}
	if best.maxHold == 0 || a.own <= best.maxHold {
		return nil
	}
	return &stock.SKUError{SKU: best.maxSKU, Err: stock.ErrHoldTooLong}
}

// minSet returns the smaller of a and b, where 0 means none.
func minSet(a, b int64) int64 {
	if a == 0 || b > 0 && b < a {
		return b
	}
	return a
}

// bindNew queues the common case of an attempt's bind: the order ID's
// directory entry created where there is none (HSETNX), as
// stock_dir_bind.lua creates it; where the entry exists the bind script
// decides. The entry's member in the open zset is added where there is
// none: one that exists is left where it is due, so a bind that meets
// another order's entry (a conflict) moves nothing, and an entry checked
// before its attempts' leases end is checked again when they do.
func (s *Store) bindNew(ctx context.Context, p redis.Pipeliner, a *attempt) *redis.BoolCmd {
	p.ZAddNX(ctx, s.dirKeys(a.o.ID)[2], redis.Z{Score: float64(a.now + s.attemptLease()), Member: a.o.ID})
	return p.HSetNX(ctx, s.dirKey(a.o.ID), a.o.ID, a.ident+"\ta0:"+a.token)
}

// bindOne binds an attempt's order ID: bindNew, then stock_dir_bind.lua
// if the entry exists. Its reply is the bind script's ("new" for an entry
// HSETNX created).
func (s *Store) bindOne(ctx context.Context, a *attempt) *redis.Cmd {
	var created *redis.BoolCmd
	s.pipelined(ctx, func(p redis.Pipeliner) { created = s.bindNew(ctx, p, a) })
	if err := created.Err(); err != nil {
		return redis.NewCmdResult(nil, err)
	}
	if created.Val() {
		return redis.NewCmdResult("new", nil)
	}
	return partReply(dirBindScript.Run(ctx, s.c, []string{s.dirKey(a.o.ID)}, a.o.ID, a.ident, a.token), 0)
}

// bindReply reads the bind's reply: its word, and for "stale" the
// identity the entry holds.
func bindReply(cmd *redis.Cmd) (word, stale string) {
	if w, err := cmd.Text(); err == nil {
		return w, ""
	}
	res, _ := cmd.Slice()
	if len(res) == 2 {
		w, _ := res[0].(string)
		id, _ := res[1].(string)
		return w, id
	}
	return "", ""
}

// takeOver binds the order ID over a stale directory entry of another
// order (no end, and no attempt bound to it for a lease) if that order
// holds nothing: an order that holds anything holds its first line (slot
// groups are taken in order). The entry is deleted as the reclaimer
// deletes one of an order that took nothing (stock_dir_check.lua), and the
// ID bound anew. It returns the bind's word, or "conflict" when the other
// order has a record or the entry changed meanwhile.
func (s *Store) takeOver(ctx context.Context, a *attempt, stale string) (string, error) {
	items, err := parseIdent(stale)
	if err != nil {
		return "conflict", nil
	}
	first := s.groups(items)[0][0]
	v, err := s.c.HGet(ctx, s.linesKey(first.SKU), a.o.ID).Result()
	if err != nil && err != redis.Nil {
		return "", &outcomeError{err: err}
	}
	r, ok, err := parseRecord(v, 0) // an ended record still read: the order is left alone
	if err != nil || ok && r.ident == stale {
		return "conflict", nil
	}
	n, err := dirCheckScript.Run(ctx, s.c, s.dirKeys(a.o.ID), a.now+s.attemptLease(), s.keep.Milliseconds(),
		a.o.ID, stale, "take", 0).Int()
	if err != nil {
		return "", &outcomeError{err: err}
	}
	if n == 0 {
		return "conflict", nil
	}
	bind := s.bindOne(ctx, a)
	if err := bind.Err(); err != nil {
		return "", s.writeErr(ctx, err)
	}
	word, _ := bindReply(bind)
	return word, nil
}

// unbind takes the attempt off the order's directory entry after a refusal
// (the last attempt to leave deletes it) and returns cause, joined with the
// unbind's own failure if it had one. An attempt that found no record of
// the order (seen false) gives the attempt set of an entry other attempts
// are still on a lease (see "The life of an order" in the package doc).
func (s *Store) unbind(ctx context.Context, a *attempt, seen bool, cause error) error {
	if a.ended {
		return cause // never on the entry
	}
	lease := int64(0)
	if !seen {
		lease = s.attemptLease()
	}
	keys := s.dirKeys(a.o.ID)
	err := dirReleaseScript.Run(ctx, s.c, []string{keys[0], keys[2]}, a.o.ID, a.ident, a.token, lease).Err()
	if err == nil {
		return cause
	}
	if errors.Is(cause, stock.ErrUnavailable) {
		cause = detached(cause)
	}
	return errors.Join(cause, fmt.Errorf("freeing its order ID: %w", s.writeErr(ctx, err)))
}

// oneDeadline moves the held lines of the groups taken before a group with
// a shorter hold time, or a shorter maximum hold time, to the order's
// deadline and bound, in one round trip (only for an order whose SKUs'
// hold times, or maximum hold times, differ between its slot groups; with
// an own hold time every group has the same deadline, so only bounds may
// move).
func (s *Store) oneDeadline(ctx context.Context, a *attempt, got []groupTaken, deadline, bound int64) error {
	var late [][]stock.Item
	for i, g := range got {
		if g.deadline > deadline || g.bound > bound {
			late = append(late, a.groups[i])
		}
	}
	if len(late) == 0 {
		return nil
	}
	cmds := make([]*redis.Cmd, len(late))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, g := range late {
			keys := make([]string, 0, 4*len(g))
			for _, it := range g {
				keys = s.dealKeys(keys, it.SKU)
			}
			cmds[i] = deadlineScript.Run(ctx, p, keys, a.o.ID, a.ident, deadline, bound, s.nowMs())
		}
	})
	return s.writeErr(ctx, errOf(cmds))
}

// deductGroup queues (on a pipeline) or runs the deduct script for the
// lines of one slot group, with the order's deadline and bound so far (0:
// none). Its reply is a list of one order's reply (see partReply).
func (s *Store) deductGroup(ctx context.Context, c redis.Scripter, a *attempt, g []stock.Item, deadline, bound int64) *redis.Cmd {
	keys, args := s.groupArgs(make([]string, 0, 4*len(g)), make([]any, 0, 12+2*len(g)), a, g, deadline, bound)
	return deductScript.Run(ctx, c, keys, args...)
}

// groupArgs appends one order's part of a stock_deduct.lua call: the keys
// and arguments of the lines of slot group g.
func (s *Store) groupArgs(keys []string, args []any, a *attempt, g []stock.Item, deadline, bound int64) ([]string, []any) {
	check := "0"
	if a.ended {
		check = "e"
	} else if len(a.groups) == 1 {
		check = "1"
	}
	args = append(args, a.now, a.o.ID, a.o.UserID, a.ident, a.token, deadline, a.own, bound, check,
		a.capDeadline, a.capBound, len(g))
	for _, it := range g {
		keys = s.dealKeys(keys, it.SKU)
		args = append(args, it.Qty, a.gens[it.SKU])
	}
	return keys, args
}

// partReply is the j-th order's reply of a script call that takes several
// orders (stock_deduct.lua, stock_dir_bind.lua), as a command of its own
// (the call's error, if it failed).
func partReply(cmd *redis.Cmd, j int) *redis.Cmd {
	res, err := cmd.Slice()
	switch {
	case err != nil:
		return redis.NewCmdResult(nil, err)
	case j >= len(res):
		return redis.NewCmdResult(nil, badReply(res))
	}
	return redis.NewCmdResult(res[j], nil)
}

// groupResult reads a deduct script's reply: the order's deadline and
// bound after the group (0 when every line of it is confirmed) and the
// shortest maximum hold time of the lines it took, or the error naming the
// failed line; and whether the group found a record of the order. A SKU
// the script found not on sale is told apart (stock.ErrUnknownSKU, or
// stock.ErrUnavailable for a gate that lost it) with a read of the
// registry.
func (s *Store) groupResult(ctx context.Context, cmd *redis.Cmd, g []stock.Item) (groupTaken, bool, error) {
	if v, ok := cmd.Val().(int64); ok && cmd.Err() == nil {
		// stock_deduct_hot.lua's answer: a new hold of a single-group
		// order, which needs nothing of groupTaken (its deadline and bound
		// are the order's), or a refusal, nothing found or written.
		return groupTaken{}, false, lineResult(v, g)
	}
	res, err := cmd.Slice()
	if err != nil {
		return groupTaken{}, false, err
	}
	code, n := replyCode(res)
	if code == "ok" && len(res) == 8 {
		found, ok0 := res[3].(int64)
		bound, ok1 := res[4].(int64)
		maxHold, ok2 := res[5].(int64)
		line, ok3 := res[6].(int64)
		past, ok4 := res[7].(int64)
		if ok0 && ok1 && ok2 && ok3 && ok4 && line >= 0 && int(line) <= len(g) {
			gt := groupTaken{deadline: n, bound: bound, maxHold: maxHold, past: past == 1}
			if line > 0 {
				gt.maxSKU = g[line-1].SKU
			}
			return gt, found > 0, nil
		}
		return groupTaken{}, found > 0, badReply(res)
	}
	found := false
	if len(res) >= 3 {
		k, _ := res[2].(int64)
		found = k > 0
	}
	if n >= 1 && int(n) <= len(g) {
		if gen, ok := res[len(res)-1].(string); code == "regen" && len(res) == 4 && ok { // n >= 1: res has 2 items or more
			s.gens.Store(g[n-1].SKU, gen)
			return groupTaken{}, found, &regenError{err: lineErr("unavailable", g[n-1].SKU)}
		}
		if code == "unknown_sku" {
			return groupTaken{}, found, s.notOnSale(ctx, g[n-1].SKU)
		}
		if err := lineErr(code, g[n-1].SKU); err != nil {
			return groupTaken{}, found, err
		}
	}
	return groupTaken{}, found, badReply(res)
}

// refuse ends an attempt refused with cause after it took groups (or
// counted on them): it undoes them, then takes the attempt off the order's
// directory entry (unbind), and returns the Deduct's outcome. An undo that
// failed leaves the attempt on the entry: its token may still be on lines
// it took, which the entry must name until they end (by the caller's retry
// or Revert, or by the reclaimer at their deadline).
func (s *Store) refuse(ctx context.Context, a *attempt, seen bool, groups [][]stock.Item, cause error, token string, held bool) error {
	undone, err := s.undo(ctx, a, groups, cause, token, held)
	if !undone {
		return err
	}
	return s.unbind(ctx, a, seen, err)
}

// undo takes the attempt token (this attempt's; "*" for every attempt,
// for lines past their bound) off the holds of groups it took or counted
// on, dropping those no other attempt counts on, and returns whether it
// did (false: a call failed, and the token may still be on some lines)
// and the outcome. A refusal (a business error that does not say the order
// ended) is the answer only if the order holds nothing as the attempt
// leaves (held: the refused group found lines of the order); otherwise,
// and whenever the undo failed, the outcome is unknown.
func (s *Store) undo(ctx context.Context, a *attempt, groups [][]stock.Item, cause error, token string, held bool) (undone bool, _ error) {
	cmds := make([]*redis.Cmd, len(groups))
	if len(groups) > 0 {
		s.pipelined(ctx, func(p redis.Pipeliner) {
			for i, g := range groups {
				cmds[i] = s.release(ctx, p, a.o.ID, a.ident, g, a.now, "drop", token)
			}
		})
	}
	for _, c := range cmds {
		res, err := c.Int64Slice() // {found, changed}
		if err != nil {
			err = fmt.Errorf("the units it took stay held until its deadline: %w", s.writeErr(ctx, err))
			return false, &outcomeError{err: errors.Join(detached(cause), err)}
		}
		held = held || len(res) != 2 || res[0] > res[1]
	}
	if held && stock.IsBusiness(cause) && !errors.Is(cause, stock.ErrHoldExpired) && !errors.Is(cause, stock.ErrOrderClosed) {
		return true, &outcomeError{err: detached(cause)}
	}
	return true, cause
}

// release queues or runs the release script for one slot group; token
// names the attempt for mode "drop" ("" otherwise).
func (s *Store) release(ctx context.Context, c redis.Scripter, order, ident string, g []stock.Item, now int64, mode, token string) *redis.Cmd {
	return s.lineScript(ctx, c, releaseScript, order, g, now, ident, s.keep.Milliseconds(), mode, token)
}
