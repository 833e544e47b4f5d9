package otelstock_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"
)

// rules/stockguard_test.yml, the promtool tests of the alerting and
// recording rules, is rules/stockguard_test.yml.tmpl with the input series
// of the real scrapes in testdata: run with -update to rewrite it after
// the scrapes change.
func TestRuleTests(t *testing.T) {
	tmpl, err := template.New("stockguard_test.yml.tmpl").Delims("[[", "]]").Funcs(template.FuncMap{
		"series": func(name string) (string, error) { return inputSeries(filepath.Join("testdata", name+".prom")) },
	}).ParseFiles(filepath.Join("rules", "stockguard_test.yml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	got.WriteString("# Made by otelstock's TestRuleTests from stockguard_test.yml.tmpl and\n# otelstock/testdata/*.prom: edit those, then run go test -run RuleTests -update.\n")
	if err := tmpl.Execute(&got, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("rules", "stockguard_test.yml")
	if *update {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got.String() {
		t.Errorf("%s is not the template expanded with testdata's scrapes (rerun with -update):\n%s", path, diffLines(string(want), got.String()))
	}
}

// inputSeries returns promtool's input series for the stockguard samples
// of the scrape at path, durations aside: a counter (_total, _count) is 0
// for 10 minutes then at its value, a gauge at its value throughout, for
// an hour at 1-minute steps.
func inputSeries(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var out strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "stockguard_") || timed.MatchString(line) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series, value := line[:i], line[i+1:]
		name, _, _ := strings.Cut(series, "{")
		values := fmt.Sprintf("%sx60", value)
		if strings.HasSuffix(name, "_total") || strings.HasSuffix(name, "_count") {
			values = fmt.Sprintf("0x10 %sx50", value)
		}
		fmt.Fprintf(&out, "      - series: '%s'\n        values: '%s'\n", series, values)
	}
	return strings.TrimSuffix(out.String(), "\n"), sc.Err()
}

// Every series the dashboard and the rules query is one a real scrape
// has: a renamed metric or label breaks this test, not the dashboard.
func TestDashboardAndRulesQueryScrapedSeries(t *testing.T) {
	var scraped strings.Builder
	for _, name := range []string{"sale", "outage", "handoff"} {
		b, err := os.ReadFile(filepath.Join("testdata", name+".prom"))
		if err != nil {
			t.Fatal(err)
		}
		scraped.Write(b)
	}
	have := scraped.String()
	for _, path := range []string{filepath.Join("dashboards", "stockguard.json"), filepath.Join("rules", "stockguard.rules.yml")} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, m := range queried.FindAllString(comment.ReplaceAllString(string(b), ""), -1) {
			names[m] = true
		}
		if len(names) < 8 {
			t.Fatalf("%s queries %d stockguard names, want more", path, len(names))
		}
		for n := range names {
			if strings.HasPrefix(n, "stockguard:") {
				continue // a recorded series
			}
			if !strings.Contains(have, n+"{") && !strings.Contains(have, n+"=") && !strings.Contains(have, ","+n+"=") {
				t.Errorf("%s queries %s, which no scrape in testdata has", path, n)
			}
		}
	}
}

// comment matches a YAML comment line.
var comment = regexp.MustCompile(`(?m)^\s*#.*$`)

// queried matches the stockguard metric and label names in a query.
var queried = regexp.MustCompile(`stockguard[_:][a-z_:]*[a-z]`)
