package redisstock

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// record is an order line's record as stock_lib.lua stores it: one field
// of its gate state's lines hash (see the header of lua/stock_lib.lua).
type record struct {
	st     string // held, confirmed, reverted, refunded or expired
	qty    int64  // units as ordered
	dl, mx int64  // deadline and bound, ms
	ident  string // user + "\n" + canonical signature
	ret    int64  // units partial returns gave back
	at     string // the attempts that count on a held line (Cluster)
	e      int64  // ms from which the record reads as absent; 0 while the order holds it
	ops    map[string]string
}

// user is the record's user ID ("" for none).
func (r record) user() string { return userOf(r.ident) }

// userOf is the user ID of an order's identity.
func userOf(ident string) string {
	user, _, _ := strings.Cut(ident, "\n")
	return user
}

// left is what the line still takes: qty less what partial returns gave
// back.
func (r record) left() int64 { return r.qty - r.ret }

var stateNames = map[byte]string{'h': "held", 'c': "confirmed", 'v': "reverted", 'f': "refunded", 'x': "expired"}

// parseRecord decodes a lines hash value (a redis HGET or HMGET value: a
// string, or nil when absent). ok is false when there is no record, or
// when its retention has passed at now: the server's time in ms (the ends
// are the server's, see stock_lib.lua; serverMs reads it), or 0 to read
// ended records whatever their end.
func parseRecord(v any, now int64) (r record, ok bool, err error) {
	str, _ := v.(string)
	if str == "" {
		return record{}, false, nil
	}
	bad := fmt.Errorf("malformed line record %q", str)
	fields := strings.Split(str, "\t")
	if len(fields) < 4 || len(fields[0]) < 2 {
		return record{}, false, bad
	}
	if r.st = stateNames[fields[0][0]]; r.st == "" {
		return record{}, false, bad
	}
	var nums [3]int64
	for i, f := range []string{fields[0][1:], fields[1], fields[2]} {
		if nums[i], err = strconv.ParseInt(f, 10, 64); err != nil {
			return record{}, false, bad
		}
	}
	r.qty, r.dl, r.mx, r.ident = nums[0], nums[1], nums[1]+nums[2], fields[3]
	for _, f := range fields[4:] {
		if f == "" {
			return record{}, false, bad
		}
		switch x := f[1:]; f[0] {
		case 'a':
			r.at = x
		case 't':
			if r.ret, err = strconv.ParseInt(x, 10, 64); err != nil {
				return record{}, false, bad
			}
		case 'e':
			if r.e, err = strconv.ParseInt(x, 10, 64); err != nil {
				return record{}, false, bad
			}
		case 'r':
			op, sig, found := strings.Cut(x, "\n")
			if !found {
				return record{}, false, bad
			}
			if r.ops == nil {
				r.ops = map[string]string{}
			}
			r.ops[op] = sig
		}
	}
	if r.e != 0 && r.e <= now {
		return record{}, false, nil
	}
	return r, true, nil
}

// entry is an order's directory entry as stock_lib.lua stores it: one
// field of the order's directory shard.
type entry struct {
	ident string
	e     int64 // ms from which the entry reads as absent; 0 while the order lives
}

// parseEntry decodes a directory shard's value (a string, or nil when
// absent). ok is false when there is no entry, or its retention has passed
// at now (the server's time in ms, as for parseRecord).
func parseEntry(v any, now int64) (d entry, ok bool, err error) {
	str, _ := v.(string)
	if str == "" {
		return entry{}, false, nil
	}
	fields := strings.Split(str, "\t")
	d.ident = fields[0]
	for _, f := range fields[1:] {
		if f != "" && f[0] == 'e' {
			if d.e, err = strconv.ParseInt(f[1:], 10, 64); err != nil {
				return entry{}, false, fmt.Errorf("malformed directory entry %q", str)
			}
		}
	}
	if d.e != 0 && d.e <= now {
		return entry{}, false, nil
	}
	return d, true, nil
}

// serverMs is the time a TIME command read, in ms: queue it in the
// pipeline whose records and entries it judges (on a Cluster it comes
// from one master, whose clock the others follow within NTP's error).
func serverMs(t *redis.TimeCmd) (int64, error) {
	v, err := t.Result()
	return v.UnixMilli(), err
}
