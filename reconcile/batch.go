package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// repairBatch examines and corrects one batch, reading again the SKUs an
// administrative write moved, up to Config.MaxAttempts times.
func (r *Reconciler) repairBatch(ctx context.Context, skus []string, dry bool) (Report, error) {
	rep := Report{Checked: len(skus)}
	// partial: SKUs a rebuild put back on sale with their living
	// buckets' units (their first bucket was lost: redisstock Partial),
	// and the attempt they are read until, two past the rebuild's (a
	// correction down first gathers a SKU's units into its first bucket,
	// which moves its fence: read again); their correction down is made
	// whatever its size.
	partial := map[string]int{}
	// ended: SKUs the pass reverted gate holds of that the record had
	// returned (endAtGate), and the attempt they are read until: one past
	// the first such end, so that they are read again after it whatever
	// Config.MaxAttempts; endedUnits: the units of those holds, reported
	// on the SKU's one entry, that of its final reading.
	ended := map[string]int{}
	endedUnits := map[string]int64{}
	// fail returns err, after reporting the ends made and not reported.
	fail := func(err error) (Report, error) {
		if !dry {
			r.noteUnreported(&rep, endedUnits, err)
		}
		return rep, err
	}
	for attempt := 1; len(skus) > 0; attempt++ {
		lastOf := func(sku string) bool { return attempt >= max(r.cfg.MaxAttempts, partial[sku], ended[sku]) }
		began := time.Now()
		fs, again, err := r.examineTwice(ctx, skus, attempt)
		if err != nil {
			return fail(err)
		}
		for i := range fs {
			fs[i].endedUnits = endedUnits[fs[i].sku]
		}
		mayEnd := func(sku string) bool { return ended[sku] == 0 || !lastOf(sku) }
		endedNow, err := r.endAtGate(ctx, fs, dry, mayEnd)
		if err != nil {
			if !dry {
				for sku, n := range endedNow {
					endedUnits[sku] += n
				}
			}
			return fail(err)
		}
		// agree counts f, which needs nothing, in agreement; one whose
		// holds the pass ended in an earlier reading is ActionEnded.
		agree := func(f *finding) {
			if f.endedUnits > 0 {
				r.note(&rep, f.correction(ActionEnded, nil))
				return
			}
			rep.InAgreement++
		}
		var rebuild []*finding
		for i := range fs {
			f := &fs[i]
			if n := endedNow[f.sku]; n > 0 {
				// The reading counted the ended holds in flight: read
				// again. A dry run changed nothing and reports this
				// reading. A SKU on its last reading whose order another
				// SKU's end reverted is left to the next pass.
				switch {
				case dry:
					f.endedUnits += n
					r.note(&rep, f.correction(ActionDryRun, nil))
				case mayEnd(f.sku):
					endedUnits[f.sku] += n
					ended[f.sku] = max(ended[f.sku], attempt+1)
					again = append(again, f.sku)
				default:
					endedUnits[f.sku] += n
					f.endedUnits += n
					r.note(&rep, f.correction(ActionStale, fmt.Errorf("reconcile: SKU %q: the pass reverted a hold of it after its last reading", f.sku)))
				}
				continue
			}
			last := lastOf(f.sku)
			_, wasPartial := partial[f.sku]
			switch {
			case f.stale && !last:
				again = append(again, f.sku)
			case f.err != nil:
				r.note(&rep, f.correction(ActionFailed, f.err))
			case f.stale:
				r.note(&rep, f.correction(ActionStale, errStale(f.sku)))
			case !f.rec.Exists && f.gate.Exists:
				r.note(&rep, f.correction(ActionFailed, fmt.Errorf("%w: %q", errNotInRecord, f.sku)))
			case !f.rec.Exists:
				agree(f) // on sale nowhere
			case !f.gate.Exists && dry:
				r.note(&rep, f.correction(ActionDryRun, nil))
			case !f.gate.Exists:
				rebuild = append(rebuild, f)
			case f.delta() == 0 && f.restocking == 0 && !r.settingsDiffer(f):
				agree(f)
			case dry:
				r.note(&rep, f.correction(ActionDryRun, nil))
			case f.delta() == 0 && !r.settingsDiffer(f):
				if _, err := r.settle(ctx, &rep, f, ActionRestocked, &again, last); err != nil {
					return fail(err)
				}
			case r.cfg.MaxAutoFix >= 0 && abs(f.delta()) > r.cfg.MaxAutoFix && !(wasPartial && f.delta() < 0):
				// Nothing is changed, the restocks in flight included: the
				// correction counts on them, and applying them alone would
				// move the gate by what the correction takes off.
				r.note(&rep, f.correction(ActionLeft, nil))
			default:
				applied, err := r.correct(ctx, f)
				switch {
				case (errors.Is(err, stock.ErrUnknownSKU) || errors.Is(err, stock.ErrInvalid)) && !last:
					// Flushed since the reading (rebuild it), or Redis sold
					// the units a negative correction would remove: read again.
					again = append(again, f.sku)
				case err != nil && stock.IsBusiness(err):
					r.note(&rep, f.correction(ActionFailed, fmt.Errorf("reconcile: adjust %q: %w", f.sku, err)))
				case err != nil:
					return fail(fmt.Errorf("reconcile: adjust %q: %w", f.sku, err))
				case !applied && !last:
					again = append(again, f.sku)
				case !applied:
					r.note(&rep, f.correction(ActionStale, errStale(f.sku)))
				default:
					if _, err := r.settle(ctx, &rep, f, ActionCorrected, &again, last); err != nil {
						return fail(err)
					}
				}
			}
		}
		_, more, claimed, rebuiltPartly, err := r.rebuild(ctx, &rep, rebuild, lastOf)
		if err != nil {
			return fail(err)
		}
		for _, f := range rebuild {
			switch {
			case !slices.Contains(rebuiltPartly, f.sku):
			case partial[f.sku] == 0: // its two readings, once
				partial[f.sku] = attempt + 2
				more = append(more, f.sku)
			case lastOf(f.sku): // rebuilt partly again: its first bucket lost again
				r.note(&rep, f.correction(ActionStale, errPartial(f.sku)))
			default:
				more = append(more, f.sku)
			}
		}
		if len(claimed) > 0 {
			if err := r.awaitRebuild(ctx, claimed, time.Since(began)); err != nil {
				return fail(err)
			}
		}
		skus = append(append(again, more...), claimed...)
	}
	return rep, nil
}

// settingsDiffer reports whether the gate's settings of f's SKU (per-user
// limit, hold time, maximum hold time) do not map to the record's: a
// listing changed at the record alone (while a breaker kept traffic off
// the gate). It compares in the direction the flow writes, gate to
// record (see agrees), so a gate whose settings give the record's is
// never relisted, however the cap at stock.MaxHoldTTL folded them.
func (r *Reconciler) settingsDiffer(f *finding) bool {
	hold, maxHold := r.holdsAgree(f)
	return f.gate.PerUserLimit != f.rec.PerUserLimit || !hold || !maxHold
}

// holdsAgree reports whether the gate's hold time and maximum hold time of
// f's SKU map to the record's (see agrees).
func (r *Reconciler) holdsAgree(f *finding) (hold, maxHold bool) {
	g, rec := f.gate.Levels, f.rec.Levels
	return agrees(g.HoldTTL, stock.Listing{HoldTTL: r.cfg.GateHold(rec.HoldTTL)}.EffectiveHoldTTL(), rec.HoldTTL),
		agrees(g.MaxHoldTTL, r.gateEffectiveMaxHold(rec), rec.MaxHoldTTL)
}

// gateHolds returns the hold time and maximum hold time a write of the
// record's settings gives the gate of f's SKU: the gate's own where they
// agree with the record's (a relist for another setting, e.g. the
// per-user limit, keeps a hold time the cap folded), the smallest that
// map to the record's otherwise.
func (r *Reconciler) gateHolds(f *finding) (hold, maxHold time.Duration) {
	hold, maxHold = r.cfg.GateHold(f.rec.HoldTTL), r.gateMaxHold(f.rec.Levels)
	if f.gate.Exists {
		holdOK, maxOK := r.holdsAgree(f)
		if holdOK {
			hold = f.gate.HoldTTL
		}
		if maxOK {
			maxHold = f.gate.MaxHoldTTL
		}
	}
	if maxHold != 0 && maxHold < hold {
		maxHold = hold
	}
	return hold, maxHold
}

// agrees reports whether a gate setting (hold time or maximum hold time)
// maps to the record's setting rec, given least, the smallest gate
// setting that maps to rec (what Config.GateHold and gateMaxHold give a
// rebuilt gate). The record's settings grow with the gate's and are
// capped at stock.MaxHoldTTL (stock/tiered RecordListing): below the cap
// only least maps to rec, at the cap every gate setting from least up
// does (a 20-day listing and a 15-day one both give a default tiered
// record 30 days). Both tiers keep whole milliseconds, each truncating
// what the flow gave it, so least, worked back from the record's
// truncated settings, is within a millisecond of what the gate keeps (a
// listing of 2h/7, max 4h/7, keeps 1028571ms, max 2057142ms, at the gate
// and 2057142ms, max 3085714ms, at a default tiered record, from which
// least max is 2057142.5ms): a gate setting that close agrees.
func agrees(gate, least, rec time.Duration) bool {
	least = least.Truncate(time.Millisecond)
	d := gate - least
	return (d >= -time.Millisecond && d <= time.Millisecond) || (rec == stock.MaxHoldTTL && d >= -time.Millisecond)
}

// correct applies f's correction at the gate, fenced: the delta (Adjust),
// with the record's settings too when they differ (a forced Relist). It
// reports whether it was applied; a SKU the gate lost since the reading
// is stock.ErrUnknownSKU, a delta the gate's count no longer allows
// stock.ErrInvalid, as Adjust answers them.
func (r *Reconciler) correct(ctx context.Context, f *finding) (bool, error) {
	if !r.settingsDiffer(f) {
		return r.gate.Adjust(ctx, f.sku, f.fence, f.delta())
	}
	hold, maxHold := r.gateHolds(f)
	got, err := r.gate.Relist(ctx, []redisstock.Relist{{SKU: f.sku, Fence: f.fence, Delta: f.delta(),
		PerUserLimit: f.rec.PerUserLimit, HoldTTL: hold, MaxHoldTTL: maxHold, Force: true}})
	switch {
	case err != nil:
		return false, err
	case got[0] == redisstock.Applied:
		f.settings = true
		return true, nil
	case got[0] == redisstock.Absent:
		return false, stock.ErrUnknownSKU
	case got[0] == redisstock.OutOfRange:
		return false, stock.ErrInvalid
	}
	return false, nil // moved
}

// settle completes f's restocks in flight at the gate (each by its
// operation ID: applied once, whoever gets there first) and notes f with
// action a, reporting whether it did. A SKU the gate lost meanwhile is read
// again (appended to again) unless this is the last attempt; one whose
// restock the gate refuses is ActionFailed.
func (r *Reconciler) settle(ctx context.Context, rep *Report, f *finding, a Action, again *[]string, last bool) (noted bool, err error) {
	for _, op := range f.pending {
		err := r.gate.Restock(ctx, stock.Restock{OpID: op.ID, SKU: op.SKU, Units: op.Units})
		switch {
		case err == nil:
		case (errors.Is(err, stock.ErrUnknownSKU) || errors.Is(err, stock.ErrUnavailable)) && !last:
			*again = append(*again, f.sku) // lost since the reading: rebuild it
			return false, nil
		case stock.IsBusiness(err) || errors.Is(err, stock.ErrUnavailable):
			r.note(rep, f.correction(ActionFailed, fmt.Errorf("reconcile: complete restock %q of %q: %w", op.ID, f.sku, err)))
			return false, nil
		default:
			return false, fmt.Errorf("reconcile: complete restock %q of %q: %w", op.ID, f.sku, err)
		}
	}
	r.note(rep, f.correction(a, nil))
	return true, nil
}

// examineTwice examines skus, then examines again those that need a
// correction, and keeps a correction only when the second reading computes
// the same one: a one-sided moment no single reading can see (see the
// package doc) does not last from one reading to the next. SKUs whose two
// readings differ are returned in again, to be read anew, unless this is
// the last attempt (then the second reading stands). On a busy SKU two
// readings can each catch such a moment, though, so the second reading
// also reads the database after Redis (examineBounded), and a correction
// upward is at most what that reading shows.
func (r *Reconciler) examineTwice(ctx context.Context, skus []string, attempt int) (fs []finding, again []string, err error) {
	fs, err = r.examine(ctx, skus)
	if err != nil {
		return nil, nil, err
	}
	var recheck []string
	for i := range fs {
		if f := &fs[i]; f.needsCorrection() {
			recheck = append(recheck, f.sku)
		}
	}
	if len(recheck) == 0 {
		return fs, nil, nil
	}
	second, err := r.examineBounded(ctx, recheck)
	if err != nil {
		return nil, nil, err
	}
	kept := fs[:0]
	j := 0
	for i := range fs {
		f := fs[i]
		if !f.needsCorrection() {
			kept = append(kept, f)
			continue
		}
		s := second[j]
		j++
		if s.readDelta() != f.readDelta() && attempt < r.cfg.MaxAttempts {
			again = append(again, f.sku)
			continue
		}
		kept = append(kept, s)
	}
	return kept, again, nil
}

// rebuild creates, from the database, the gate state of SKUs Redis had no
// state for, only where it still has none (redisstock Store.Rebuild): the
// new count includes every restock the view saw, so those are marked
// applied. A SKU that got a state meanwhile (another reconciler rebuilt
// it, orders may already hold it) is left alone and returned in again, to
// be read again; one whose claim another reader took since is returned in
// claimed (that reader is rebuilding it: see awaitRebuild). On the last
// attempt either is ActionStale (last tells a SKU's). The SKUs it created
// are returned in applied; those it created beside buckets that lived
// (redisstock Partial), on sale with their units, not the record's, in
// partial, for the caller to read again and correct.
func (r *Reconciler) rebuild(ctx context.Context, rep *Report, fs []*finding, last func(sku string) bool) (applied []*finding, again, claimed, partial []string, err error) {
	if len(fs) == 0 {
		return nil, nil, nil, nil, nil
	}
	rs := make([]redisstock.Rebuild, len(fs))
	for i, f := range fs {
		rs[i] = r.rebuildOf(f)
	}
	got, err := r.gate.Rebuild(ctx, rs)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("reconcile: rebuild: %w", err)
	}
	for i, f := range fs {
		switch {
		case got[i] == redisstock.Applied:
			applied = append(applied, f)
			r.note(rep, f.correction(ActionRebuilt, nil))
		case got[i] == redisstock.Partial:
			partial = append(partial, f.sku)
		case last(f.sku):
			r.note(rep, f.correction(ActionStale, fmt.Errorf("reconcile: SKU %q got a Redis state while it was rebuilt", f.sku)))
		case got[i] == redisstock.Moved:
			claimed = append(claimed, f.sku)
		default:
			again = append(again, f.sku)
		}
	}
	return applied, again, claimed, partial, nil
}

// awaitRebuild waits, up to twice took (how long this attempt read and
// rebuilt), for the SKUs whose rebuild claim another reader took since
// this one's to get a state, polling their fences, before they are read
// again. Reading them again at once would claim them again, voiding the
// claim of the reader about to rebuild them; two passes doing that to
// each other never rebuild (each one's claim lands while the other reads
// the database). The other reader usually takes no longer than this one:
// after the wait a SKU still without a state is claimed again (that reader
// may have stopped). Only ctx ending is an error.
func (r *Reconciler) awaitRebuild(ctx context.Context, skus []string, took time.Duration) error {
	until := time.Now().Add(2 * took)
	step := min(max(took/8, time.Millisecond), 50*time.Millisecond)
	t := time.NewTimer(step)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("reconcile: wait for another reader's rebuild: %w", ctx.Err())
		case <-t.C:
		}
		sts, err := r.gate.Inspect(ctx, skus)
		if err != nil {
			return nil // the reading again will say
		}
		done := true
		for _, st := range sts {
			done = done && st.Exists
		}
		if done || time.Now().After(until) {
			return nil
		}
		t.Reset(step)
	}
}

// rebuildOf is the Rebuild of a SKU Redis has no state for: its target, the
// record's settings, and every restock of the window the view saw.
func (r *Reconciler) rebuildOf(f *finding) redisstock.Rebuild {
	b := redisstock.Rebuild{Listing: stock.Listing{SKU: f.sku, Units: f.target, PerUserLimit: f.rec.PerUserLimit,
		HoldTTL: r.cfg.GateHold(f.rec.HoldTTL), MaxHoldTTL: r.gateMaxHold(f.rec.Levels)}, Claim: f.claim}
	for _, op := range f.ops {
		b.Ops = append(b.Ops, op.ID)
	}
	return b
}

// errPartial is the error of a SKU rebuilt beside buckets that lived
// (redisstock Partial) and left out of agreement.
func errPartial(sku string) error {
	return fmt.Errorf("reconcile: SKU %q was rebuilt beside buckets that lived, with their units, and is not in agreement", sku)
}

func errStale(sku string) error {
	return fmt.Errorf("reconcile: SKU %q kept changing under administrative writes", sku)
}

// gateMaxHold maps the record's MaxHoldTTL of a SKU to the gate's: the
// record's less the grace Config.GateHold takes off the hold time (a
// stock/tiered record holds every deadline that grace longer, its
// MaxHoldTTL included), between the gate's hold time and
// stock.MaxHoldTTL. Zero, the hold time, when the record's is its hold
// time. It is the smallest gate maximum that maps to the record's: a
// record MaxHoldTTL that tiered capped at stock.MaxHoldTTL gives a
// rebuilt gate a maximum up to the grace shorter than the listing's
// (extensions are bounded a little early, never late), and a plain pass
// leaves a gate's longer one as it is (see agrees).
func (r *Reconciler) gateMaxHold(rec stock.Levels) time.Duration {
	if rec.MaxHoldTTL <= rec.HoldTTL {
		return 0
	}
	hold := stock.Listing{HoldTTL: r.cfg.GateHold(rec.HoldTTL)}.EffectiveHoldTTL()
	return min(max(rec.MaxHoldTTL-(rec.HoldTTL-hold), hold), stock.MaxHoldTTL)
}

// gateEffectiveMaxHold is gateMaxHold with its zero filled in: the
// MaxHoldTTL the gate reports (stock.Levels) once it has the record's
// settings.
func (r *Reconciler) gateEffectiveMaxHold(rec stock.Levels) time.Duration {
	return stock.Listing{HoldTTL: r.cfg.GateHold(rec.HoldTTL), MaxHoldTTL: r.gateMaxHold(rec)}.EffectiveMaxHoldTTL()
}
