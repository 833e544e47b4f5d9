package lua

import (
	"regexp"
	"strings"
	"testing"
)

// A script that calls the codec of stock_lib.lua says so in its header,
// where Script looks for it: otherwise it would run without the codec.
func TestScriptsThatUseTheLibSayIt(t *testing.T) {
	lib := regexp.MustCompile(`\b(rec_decode|rec_encode|rec_get|rec_put|rec_end|rec_op|dir_decode|` +
		`dir_encode|dir_attempts|has_token|without_token|refuse_layout1|q_head|q_ids|each_value)\b|\bclock\(\)`)
	for _, name := range Names() {
		if !strings.HasSuffix(name, ".lua") || name == "stock_lib.lua" {
			continue
		}
		src := Source(name)
		uses := lib.MatchString(src)
		if uses != (Script(name) != src) {
			t.Errorf("%s: uses the codec %v, gets stock_lib.lua %v", name, uses, Script(name) != src)
		}
	}
}
