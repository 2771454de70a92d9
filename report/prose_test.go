package report

import (
	"strings"
	"testing"
)

// TestProse: report text's backtick code spans become <code> elements, everything escaped.
func TestProse(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"run with `--allow-tcg` to boot", "run with <code>--allow-tcg</code> to boot"},
		{"`a` and `b`", "<code>a</code> and <code>b</code>"},
		{"`<script>&` <b>", "<code>&lt;script&gt;&amp;</code> &lt;b&gt;"},
		{"one ` alone", "one ` alone"},
		{"`x` then ` alone", "<code>x</code> then ` alone"},
		{"", ""},
	} {
		if got := string(prose(c.in)); got != c.want {
			t.Errorf("prose(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestHTMLCodeSpans: a verdict, a list item and a table cell with backticks render as <code> in
// report.html, with no literal backtick left around them.
func TestHTMLCodeSpans(t *testing.T) {
	r := &Report{}
	d := doc{title: "t", sections: []section{{id: "s", title: "S", level: 2, blocks: []block{
		{para: "boot with `--allow-tcg`", strong: true},
		{list: []string{"list `item<1>`"}},
		{table: &table{id: "x", header: []string{"a"}, right: []bool{false}, rows: [][]string{{"cell `c`"}}}},
	}}}}
	var b strings.Builder
	if err := r.writeHTMLDoc(&b, d, nil); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<code>--allow-tcg</code>", "<code>item&lt;1&gt;</code>", "<td>cell <code>c</code></td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "`") {
		t.Errorf("a literal backtick is left in the page")
	}
}
