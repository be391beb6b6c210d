package chart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// wellFormed fails the test unless b parses as XML to its end.
func wellFormed(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 100, []float64{0, 20, 40, 60, 80, 100}},
		{0, 7, []float64{0, 2, 4, 6, 8}},
		{50, 200, []float64{50, 100, 150, 200}}, // raw step 30 rounds up to 50,
		{0, 0.3, []float64{0, 0.1, 0.2, 0.30000000000000004}},
		{5, 5, []float64{5, 5.2, 5.4, 5.6, 5.8, 6}}, // an empty range spans one unit,
	} {
		if got := niceTicks(c.lo, c.hi); !slices.Equal(got, c.want) {
			t.Errorf("niceTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

func TestTickLabels(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.30000000000000004: "0.3", 1500: "1500", 2.5e7: "2.5e+07", 0.00002: "2e-05"} {
		if got := tick(v); got != want {
			t.Errorf("tick(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestStackedCharts(t *testing.T) {
	a := &Chart{Title: "goodput <&>", XLabel: "offered", YLabel: "req/s"}
	a.Line("measured", []float64{50, 100, 150}, []float64{50, 99, 101})
	a.Add(Series{Name: "simulated", X: []float64{50, 100, 150}, Y: []float64{50, 100, 100}, Dashed: true, Color: Palette(0)})
	b := &Chart{Title: "p99", LogY: true}
	b.Line("p99", []float64{1, 2, 3}, []float64{10, 0, 1000}) // 0 is left out on a log axis
	svg, err := SVG(a, b)
	if err != nil {
		t.Fatal(err)
	}
	wellFormed(t, svg)
	s := string(svg)
	for _, want := range []string{
		`height="800" viewBox="0 0 720 800"`,
		`<g transform="translate(0,400)">`,
		`goodput &lt;&amp;&gt;`,
		`stroke="#1f77b4" stroke-width="2" stroke-dasharray="6,4"`, // the simulated line, in the measured one's colour
		`fill="white" stroke="#1f77b4"`,                            // its hollow markers
	} {
		if !strings.Contains(s, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if n := strings.Count(s, "stroke-dasharray"); n != 2 { // line and legend
		t.Errorf("%d dashed elements, want 2", n)
	}
	if n := strings.Count(s, "<circle"); n != 3+3+2 {
		t.Errorf("%d markers, want 8", n)
	}
}

func TestWriteSVGErrors(t *testing.T) {
	if err := WriteSVG(io.Discard); !errors.Is(err, ErrNoChart) {
		t.Errorf("no chart: %v, want ErrNoChart", err)
	}
	c := &Chart{Title: "bad"}
	c.Line("short", []float64{1, 2}, []float64{1})
	if err := WriteSVG(io.Discard, c); err == nil || !strings.Contains(err.Error(), `"short" has 2 x values and 1 y values`) {
		t.Errorf("mismatched series: %v", err)
	}
	if err := WriteSVG(io.Discard, nil); err == nil {
		t.Error("nil chart: no error")
	}
}

func TestEmptyChartDraws(t *testing.T) {
	svg, err := SVG(&Chart{Title: "nothing yet"})
	if err != nil {
		t.Fatal(err)
	}
	wellFormed(t, svg)
}

func TestWriteHTML(t *testing.T) {
	c := &Chart{Title: "t"}
	c.Line("a", []float64{1, 2}, []float64{3, 4})
	svg, err := SVG(c)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, "load <test>", svg, "rate  p99\n100   <5 ms\n"); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{"<title>load &lt;test&gt;</title>", "<pre>rate  p99\n100   &lt;5 ms</pre>", string(svg)} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, banned := range []string{"<script", "<link", "src=", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(s, `xmlns="http://www.w3.org/2000/svg"`, ""), banned) {
			t.Errorf("page is not self-contained: has %q", banned)
		}
	}
	if strings.Index(s, "<svg") > strings.Index(s, "<pre>") {
		t.Error("the image should come before the tables")
	}
}
