package metric_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

func TestVocabulary(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range metric.All() {
		if d.Probe == "" || d.Metric == "" || d.Unit == "" || d.Doc == "" {
			t.Errorf("%s: incomplete definition %+v", d.ID(), d)
		}
		if seen[d.ID()] {
			t.Errorf("%s defined twice", d.ID())
		}
		seen[d.ID()] = true
		got, ok := metric.Lookup(d.Probe, d.Metric)
		if !ok || got != d {
			t.Errorf("Lookup(%s) = %+v, %v", d.ID(), got, ok)
		}
	}
	s := metric.IperfThroughput.Sample(1e9, map[string]string{"side": "receiver"})
	if s.Probe != "iperf3" || s.Metric != "throughput" || s.Unit != "bit/s" || s.Value != 1e9 || s.Time.IsZero() {
		t.Errorf("Sample: %+v", s)
	}
}

func TestCheck(t *testing.T) {
	ok := []results.Sample{metric.PingRTT.Sample(1, nil), metric.CPUUser.Sample(1, nil)}
	if err := metric.Check(ok); err != nil {
		t.Errorf("known samples: %v", err)
	}
	bad := append(ok, results.Sample{Probe: "ping", Metric: "rtt_ms"}, results.Sample{Probe: "x", Metric: "y"},
		results.Sample{Probe: "ping", Metric: "rtt_ms"})
	err := metric.Check(bad)
	u, isU := err.(*metric.UnknownError)
	if !isU || u.Probe != "ping" || u.Metric != "rtt_ms" || u.Count != 2 || !strings.Contains(err.Error(), "ping/rtt_ms") {
		t.Errorf("unknown samples: %v", err)
	}
}

// TestProbesUseTheVocabulary reads the source of every probe and of the runner: every sample
// they build with a probe and metric name written out (probe.NewSample, a results.Sample
// literal, or a local helper add/lab/sum/count given the metric) must name a metric of the
// vocabulary, so a probe that renames a metric without it fails here, before any report.
func TestProbesUseTheVocabulary(t *testing.T) {
	checked := 0
	for _, root := range []string{"../../probe", "../../bench"} {
		dirs := map[string]bool{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				dirs[filepath.Dir(p)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for dir := range dirs {
			checked += checkPackage(t, dir)
		}
	}
	t.Logf("%d samples with written-out names checked", checked)
	if checked < 20 {
		t.Errorf("only %d samples with written-out names found: the scan no longer sees the probes", checked)
	}
}

func checkPackage(t *testing.T, dir string) int {
	fset := token.NewFileSet()
	var files []*ast.File
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, m, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	consts := map[string]string{}
	for _, f := range files {
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if v, ok := str(vs.Values[i], nil); ok {
							consts[n.Name] = v
						}
					}
				}
			}
		}
	}
	probeName := consts["Name"]
	n := 0
	check := func(pos token.Pos, probe, m string) {
		n++
		if _, ok := metric.Lookup(probe, m); !ok {
			t.Errorf("%s: sample %s/%s is not in the vocabulary (results/metric)", fset.Position(pos), probe, m)
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(node ast.Node) bool {
			switch x := node.(type) {
			case *ast.CallExpr:
				name := ""
				switch fn := x.Fun.(type) {
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				case *ast.Ident:
					name = fn.Name
				}
				switch {
				case name == "NewSample" && len(x.Args) >= 2:
					p, ok1 := str(x.Args[0], consts)
					m, ok2 := str(x.Args[1], consts)
					if ok1 && ok2 {
						check(x.Pos(), p, m)
					}
				case (name == "add" || name == "lab" || name == "sum" || name == "count") && len(x.Args) >= 2 && probeName != "":
					if lit, ok := x.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						m, _ := strconv.Unquote(lit.Value)
						check(x.Pos(), probeName, m)
					}
				}
			case *ast.CompositeLit:
				sel, ok := x.Type.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Sample" {
					return true
				}
				var p, m string
				var okP, okM bool
				for _, el := range x.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					switch k := kv.Key.(*ast.Ident); k.Name {
					case "Probe":
						p, okP = str(kv.Value, consts)
					case "Metric":
						m, okM = str(kv.Value, consts)
					}
				}
				if okP && okM {
					check(x.Pos(), p, m)
				}
			}
			return true
		})
	}
	return n
}

// str resolves a string literal or a constant of the package.
func str(e ast.Expr, consts map[string]string) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind == token.STRING {
			s, err := strconv.Unquote(x.Value)
			return s, err == nil
		}
	case *ast.Ident:
		v, ok := consts[x.Name]
		return v, ok
	}
	return "", false
}

func TestDefine(t *testing.T) {
	d := metric.Define("test-probe", "widgets", "count", "widgets a test probe counts")
	if got, ok := metric.Lookup("test-probe", "widgets"); !ok || got != d {
		t.Errorf("Lookup after Define: %+v, %v", got, ok)
	}
	if err := metric.Check([]results.Sample{d.Sample(3, nil)}); err != nil {
		t.Errorf("a defined metric is unknown: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("defining ping/rtt again did not panic")
		}
	}()
	metric.Define("ping", "rtt", "ms", "again")
}
