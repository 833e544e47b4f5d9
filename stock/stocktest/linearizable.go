package stocktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stockguard/stockguard/stock"
)

// One SKU as a sequential object: deduct, revert and read. Orders are
// numbered 0..63 so the state is two bitmasks and a count.
type lzState struct {
	avail int64
	held  uint64 // orders holding units
	qty   [64]int8
}

type lzInput struct {
	op  byte // 'd' deduct, 'r' revert, 'a' available
	ord int
	qty int64
}

type lzOutput struct {
	known bool  // false: the call failed in a way that leaves its effect unknown
	ok    bool  // deduct taken / revert accepted
	avail int64 // for 'a'
}

func lzStep(s lzState, in lzInput, out lzOutput) []lzState {
	bit := uint64(1) << in.ord
	switch in.op {
	case 'd':
		taken := s
		canTake := s.avail >= in.qty && s.held&bit == 0
		if canTake {
			taken.avail -= in.qty
			taken.held |= bit
			taken.qty[in.ord] = int8(in.qty)
		}
		switch {
		case !out.known && canTake:
			return []lzState{s, taken}
		case !out.known:
			return []lzState{s}
		case out.ok && canTake:
			return []lzState{taken}
		case !out.ok && s.avail < in.qty:
			return []lzState{s}
		}
		return nil
	case 'r':
		if s.held&bit != 0 {
			s.avail += int64(s.qty[in.ord])
			s.held &^= bit
		}
		return []lzState{s}
	default:
		if out.avail == s.avail {
			return []lzState{s}
		}
		return nil
	}
}

var lzModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{lzState{avail: lzUnits}} },
	Step: func(state, input, output any) []any {
		next := lzStep(state.(lzState), input.(lzInput), output.(lzOutput))
		out := make([]any, len(next))
		for i, n := range next {
			out[i] = n
		}
		return out
	},
	Hash: func(state any) uint64 {
		s := state.(lzState)
		return uint64(s.avail)*0x9e3779b97f4a7c15 ^ s.held
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lzInput), output.(lzOutput)
		return fmt.Sprintf("%c o%d x%d -> known=%v ok=%v avail=%d", in.op, in.ord, in.qty, out.known, out.ok, out.avail)
	},
}

const lzUnits = 20

// Linearizability: a concurrent history of deducts (some cut short by tiny
// deadlines, so their outcome is unknown), reverts and reads must be
// explainable by one sequential order of the calls.
func init() {
	register("HistoryIsLinearizable", func(e *env) {
		e.sale("lz", lzUnits, 0, time.Hour)
		const clients, perClient = 4, 16
		var (
			mu    sync.Mutex
			ops   []porcupine.Operation
			wg    sync.WaitGroup
			start = time.Now()
		)
		now := func() int64 { return int64(time.Since(start)) }
		record := func(client int, in lzInput, call int64, out lzOutput) {
			ret := now()
			if !out.known {
				ret = 1 << 62 // it may still take effect at any later time
			}
			mu.Lock()
			ops = append(ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
			mu.Unlock()
		}
		for c := range clients {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(c), 3))
				var mine []int
				for k := range perClient {
					ord := c*perClient + k
					switch r := rng.IntN(6); {
					case r < 3 || len(mine) == 0:
						in := lzInput{op: 'd', ord: ord, qty: 1 + rng.Int64N(2)}
						ctx := e.ctx()
						var cancel context.CancelFunc = func() {}
						if rng.IntN(4) == 0 {
							ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(300))*time.Microsecond)
						}
						call := now()
						err := e.m.Deduct(ctx, order(oid("lz", ord), "", item("lz", in.qty)))
						cancel()
						out := lzOutput{known: true, ok: err == nil}
						if err != nil && !errors.Is(err, stock.ErrSoldOut) {
							out.known = false
						}
						if err == nil {
							mine = append(mine, ord)
						}
						record(c, in, call, out)
					case r < 4:
						in := lzInput{op: 'r', ord: mine[rng.IntN(len(mine))]}
						call := now()
						if err := e.revertR(oid("lz", in.ord)); err != nil {
							e.t.Errorf("Revert: %v", err)
							return
						}
						record(c, in, call, lzOutput{known: true, ok: true})
					default:
						call := now()
						n, err := e.m.Available(e.ctx(), "lz")
						if err != nil {
							e.t.Errorf("Available: %v", err)
							return
						}
						record(c, lzInput{op: 'a'}, call, lzOutput{known: true, avail: n})
					}
				}
			})
		}
		wg.Wait()
		if res := porcupine.CheckOperationsTimeout(lzModel.ToModel(), ops, 30*time.Second); res != porcupine.Ok {
			e.t.Fatalf("history of %d operations is not linearizable (%s): %v", len(ops), res, ops)
		}
		// Whatever the unknown outcomes were, the books balance.
		lv := e.levels("lz")
		if lv.Available+lv.Held != lzUnits || lv.Available < 0 {
			e.t.Fatalf("levels %+v do not add up to %d", lv, lzUnits)
		}
	})
}
