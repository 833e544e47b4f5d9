package redisstream_test

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
)

// claimBody and claimSHA are the claim script's text and SHA-1: a claim is
// one call of it (EVALSHA, or EVAL after NOSCRIPT).
var (
	claimBody = lua.Script("handoff_claim.lua")
	claimSHA  = func() string { h := sha1.Sum([]byte(claimBody)); return hex.EncodeToString(h[:]) }()
)

// isClaim tells whether cmd is a call of the claim script.
func isClaim(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	switch cmd.Name() {
	case "evalsha":
		return args[1] == claimSHA
	case "eval":
		return args[1] == claimBody
	}
	return false
}

// ranClaim tells whether cmd is a call of the claim script that ran (not
// one the server answered NOSCRIPT, which go-redis sends again as EVAL).
func ranClaim(cmd redis.Cmder) bool {
	return isClaim(cmd) && (cmd.Err() == nil || !strings.HasPrefix(cmd.Err().Error(), "NOSCRIPT"))
}

// claimedIDs are the IDs of the deliveries a claim script call took.
func claimedIDs(cmd redis.Cmder) []string {
	c, ok := cmd.(*redis.Cmd)
	if !ok || !isClaim(cmd) || c.Err() != nil {
		return nil
	}
	r, _ := c.Slice()
	var ids []string
	for i := 2; i+2 < len(r); i += 3 {
		if id, ok := r[i].(string); ok {
			ids = append(ids, id)
		}
	}
	return ids
}
