package report

import (
	"fmt"
	"html/template"
	"io"
	"strings"
)

// htmlCSS is the page's only style sheet, inlined.
const htmlCSS = `
:root { color-scheme: light; }
body { font-family: -apple-system, "Segoe UI", Roboto, "Liberation Sans", Arial, sans-serif; color: #1b1b1b;
  background: #fff; margin: 0; line-height: 1.45; }
main { max-width: 1100px; margin: 0 auto; padding: 1.5rem 1.5rem 3rem; }
h1 { font-size: 1.6rem; margin: 0 0 1rem; }
h2 { font-size: 1.3rem; margin: 2.2rem 0 0.6rem; padding-bottom: 0.2rem; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05rem; margin: 1.4rem 0 0.5rem; }
p { margin: 0.6rem 0; max-width: 75ch; }
p.status { background: #fff3cd; border: 1px solid #e0b000; padding: 0.6rem 0.8rem; font-weight: 600; max-width: none; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.92rem; }
th, td { border: 1px solid #d0d0d0; padding: 0.3rem 0.6rem; vertical-align: top; }
th { background: #f2f4f7; text-align: left; }
/* A row's name stays readable beside wide numeric columns (they do not wrap). */
td:first-child { min-width: 12ch; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
/* Long headers of numeric columns wrap, so a wide table fits before it scrolls. */
th.num { white-space: normal; }
tbody tr:nth-child(even) { background: #fafafa; }
ul { max-width: 90ch; }
figure { margin: 1rem 0; }
figure svg.chart { width: 100%; max-width: 780px; height: auto; display: block; }
figcaption { font-size: 0.9rem; color: #444; }
section#verdict { background: #f3f7fb; border-left: 4px solid #2f6fab; padding: 0.2rem 1.2rem 0.8rem; margin-top: 1rem; }
section#verdict h2 { margin-top: 0.8rem; border-bottom: none; }
section#verdict li { margin: 0.25rem 0; }
/* The first screen: the study's conclusions, then its figures two abreast. */
section#conclusions { background: #f3f7fb; border-left: 4px solid #2f6fab; padding: 0.2rem 1.2rem 0.6rem; margin-top: 0.6rem; }
section#conclusions h2 { margin-top: 0.6rem; border-bottom: none; }
section#conclusions table { font-size: 0.88rem; background: #fff; }
section#conclusions td.outcome { font-weight: 600; min-width: 9ch; }
td details { margin-top: 0.2rem; color: #3d3d3d; }
td details summary { cursor: pointer; color: #2f6fab; }
td.holds { color: #1a6b2f; }
td.partly { color: #8a5a00; }
td.fails { color: #a4161a; }
td.unknown { color: #5c5c5c; }
section#conclusions figure { display: inline-block; vertical-align: top; width: 49%; margin: 0.6rem 0 0; }
section#conclusions figure svg.chart { max-width: none; }
section#conclusions figure:only-of-type { display: block; width: auto; }
section#conclusions figure:only-of-type svg.chart { max-width: 780px; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 0.9em; background: #eef1f4; padding: 0 0.2em; border-radius: 3px; }
`

const htmlTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>{{.CSS}}</style>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
{{- range .Sections}}
<section id="{{.ID}}">
{{if eq .Level 2}}<h2>{{.Title}}</h2>{{else}}<h3>{{.Title}}</h3>{{end}}
{{- range .Blocks}}
{{- if .Table}}
<div class="table-wrap"><table id="{{.Table.ID}}">
<thead><tr>{{range .Table.Header}}<th{{if .Right}} class="num"{{end}}>{{prose .Text}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Table.Rows}}
<tr>{{range .}}<td{{if .Class}} class="{{.Class}}"{{else if .Right}} class="num"{{end}}>{{prose .Text}}{{if .Detail}}<details><summary>{{.DetailLabel}}</summary>{{prose .Detail}}</details>{{end}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table></div>
{{- else if .List}}
<ul>
{{- range .List}}
<li>{{prose .}}</li>
{{- end}}
</ul>
{{- else if .Chart}}
<figure id="chart-{{.Chart.Name}}">{{.Chart.SVG}}<figcaption>{{prose .Chart.Title}}</figcaption></figure>
{{- else if .Strong}}
<p class="status">{{prose .Para}}</p>
{{- else if .Para}}
<p>{{prose .Para}}</p>
{{- end}}
{{- end}}
</section>
{{- end}}
</main>
</body>
</html>
`

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{"prose": prose}).Parse(htmlTemplate))

// prose renders report text as HTML: every character escaped, and each pair of backticks (the
// Markdown code spans the text and Markdown reports share, e.g. `--allow-tcg`) as a <code>
// element instead of literal backticks. An unpaired backtick stays as it is.
func prose(s string) template.HTML {
	parts := strings.Split(s, "`")
	if len(parts)%2 == 0 { // an odd number of backticks: the last one opens nothing
		parts[len(parts)-2] += "`" + parts[len(parts)-1]
		parts = parts[:len(parts)-1]
	}
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 {
			b.WriteString("<code>" + template.HTMLEscapeString(p) + "</code>")
			continue
		}
		b.WriteString(template.HTMLEscapeString(p))
	}
	return template.HTML(b.String()) //nolint:gosec // every part escaped above
}

type htmlCell struct {
	Text  string
	Right bool
	// Detail, when set, follows the text folded under DetailLabel (a <details> element).
	Detail, DetailLabel string
	// Class, when set, replaces the cell's class (outcomes of the conclusions table).
	Class string
}

type htmlTable struct {
	ID     string
	Header []htmlCell
	Rows   [][]htmlCell
}

type htmlChart struct {
	Name, Title string
	SVG         template.HTML
}

type htmlBlock struct {
	Para   string
	Strong bool
	List   []string
	Table  *htmlTable
	Chart  *htmlChart
}

type htmlSection struct {
	ID, Title string
	Level     int
	Blocks    []htmlBlock
}

// HTML writes the report as one self-contained HTML page: inline CSS,
// charts as inline SVG, no script and no external reference of any kind.
func (r *Report) HTML(w io.Writer) error {
	cs, err := r.charts()
	if err != nil {
		return fmt.Errorf("write HTML report: %w", err)
	}
	charts := map[string]chart{}
	for _, c := range cs {
		charts[c.name] = c
	}
	return r.writeHTMLDoc(w, r.doc(), charts)
}

// writeHTMLDoc writes d as the HTML page, its chart slots filled from charts.
func (r *Report) writeHTMLDoc(w io.Writer, d doc, charts map[string]chart) error {
	data := struct {
		Title    string
		CSS      template.CSS
		Sections []htmlSection
	}{Title: d.title, CSS: template.CSS(htmlCSS)}
	for _, sec := range d.sections {
		hs := htmlSection{ID: sec.id, Title: sec.title, Level: sec.level}
		for _, b := range sec.blocks {
			hb := htmlBlock{Para: b.para, Strong: b.strong, List: b.list}
			if b.table != nil {
				hb.Table = toHTMLTable(b.table)
			}
			if b.chart != "" {
				c, ok := charts[b.chart]
				if !ok {
					continue
				}
				// The SVG is produced by gonum/plot from our own data; vgsvg
				// escapes every text it draws.
				hb.Chart = &htmlChart{Name: c.name, Title: c.title, SVG: template.HTML(inlineSVG(c.svg, c.title))} //nolint:gosec
			}
			hs.Blocks = append(hs.Blocks, hb)
		}
		data.Sections = append(data.Sections, hs)
	}
	if err := htmlTmpl.Execute(w, data); err != nil {
		return fmt.Errorf("write HTML report: %w", err)
	}
	return nil
}

func toHTMLTable(t *table) *htmlTable {
	ht := &htmlTable{ID: t.id}
	for i, h := range t.header {
		ht.Header = append(ht.Header, htmlCell{Text: h, Right: t.right[i]})
	}
	for ri, row := range t.rows {
		var cells []htmlCell
		for i, c := range row {
			cell := htmlCell{Text: c, Right: t.right[i]}
			if t.id == "conclusions-table" && i == 1 {
				cell.Class = "outcome " + outcomeClass(c)
			}
			if i == len(row)-1 && ri < len(t.details) && t.details[ri] != "" {
				cell.DetailLabel, cell.Detail = t.detailLabel, t.details[ri]
			}
			cells = append(cells, cell)
		}
		ht.Rows = append(ht.Rows, cells)
	}
	return ht
}

// outcomeClass colours a claim's outcome: holds, partly (in direction, not in size), fails,
// or unknown.
func outcomeClass(outcome string) string {
	switch {
	case outcome == DoesNotHold:
		return "fails"
	case outcome == HoldsDirection:
		return "partly"
	case strings.HasPrefix(outcome, Holds):
		return "holds"
	}
	return "unknown"
}
